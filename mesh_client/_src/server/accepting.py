"""The listening socket of a proc server, on the reactor: accepts in batches and survives
running out of file descriptors.

When ``accept()`` fails for lack of descriptors (EMFILE, ENFILE) or kernel memory, the pending
connection stays in the backlog and the listener stays readable, so polling it again would
spin. Instead the listener leaves the selector for a short, growing delay (:class:`Backoff`),
one rate-limited line is logged, and accepting resumes by itself; connections waiting in the
backlog are served once descriptors are free again. :mod:`.dispatch` decides what to do with
each accepted socket; :func:`describe_peer` names its peer, on TCP or on the unix listener of a
local proc (:mod:`mesh_client._src.runtime.unixlinks`), which gets the same treatment as TCP.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Callable

from mesh_client._src.runtime import reactor as reactor_mod
from mesh_client._src.server import throttling

# Out of a resource: back off. Anything else from accept() concerns one connection only.
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def describe_peer(sock: socket.socket, peer: object) -> str:
    """``host:port`` of a TCP peer; ``local pid N (unix socket)`` of one on the unix listener
    (its address is empty: the kernel's credentials say who it is)."""
    if sock.family != socket.AF_UNIX:
        host, port = peer[:2]  # type: ignore[index]
        return f"{host}:{port}"
    try:
        pid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    except (OSError, AttributeError, struct.error):  # SO_PEERCRED is Linux's
        return "a local process (unix socket)"
    return f"local pid {pid} (unix socket)"


class Acceptor:
    """Registered with the reactor as the listener's reader; hands sockets to ``on_accept``."""

    # Connections accepted per wake-up: enough to drain a burst, few enough to keep serving
    # the other sockets of this reactor in between.
    BATCH = 8
    # New connections are strangers: the reactor serves authenticated channels first.
    prioritized = False

    def __init__(
        self,
        listener: socket.socket,
        reactor: reactor_mod.Reactor,
        on_accept: Callable[[socket.socket, str], None],  # the socket, and describe_peer's name
        *,
        backoff: throttling.Backoff | None = None,
        log: throttling.RateLimitedLog | None = None,
    ) -> None:
        listener.setblocking(False)
        self.listener = listener
        self._reactor = reactor
        self._on_accept = on_accept
        self._backoff = backoff or throttling.Backoff()
        self.log = log or throttling.RateLimitedLog("accept() failures", reactor.call_later)
        self.paused = False

    def __repr__(self) -> str:
        return f"<Acceptor fd {self.listener.fileno()} {'paused' if self.paused else 'polling'}>"

    def fileno(self) -> int:
        return self.listener.fileno()

    def start(self) -> None:
        self._reactor.register(self)

    def on_readable(self) -> None:
        for _ in range(self.BATCH):
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in EXHAUSTED:
                    self._pause(exc)
                    return
                continue  # ECONNABORTED and the like: that connection is gone, others wait
            self._backoff.reset()
            self._on_accept(sock, describe_peer(sock, peer))

    def _pause(self, exc: OSError) -> None:
        delay = self._backoff.next_delay()
        self.paused = True
        self._reactor.unregister(self)
        self._reactor.call_later(delay, self._resume)
        self.log.note(
            f"procmesh: cannot accept connections: {exc.strerror} ({errno.errorcode.get(exc.errno or 0, exc.errno)});"
            f" pausing the listener for {delay * 1000:.0f} ms (raise RLIMIT_NOFILE if this persists)"
        )

    def _resume(self) -> None:
        self.paused = False
        self._reactor.register(self)
