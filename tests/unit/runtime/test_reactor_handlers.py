"""The reactor's map of descriptors to handlers, on a real reactor thread and real sockets.

Aspects: a peer that hangs up is served (its handler reads the end of stream), registering a
handler twice serves it once per readiness, and unregistering a handler whose descriptor now
belongs to another leaves that other one registered; a handler raising SystemExit is reported
and the loop goes on.
"""

import socket
import threading

from mesh_client._src.runtime import reactor


class Reading:
    """Reads what is there and records each read (b"" is the end of stream)."""

    def __init__(self, sock: socket.socket, reads: list[bytes], done: threading.Event) -> None:
        self.sock, self.reads, self.done = sock, reads, done
        sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def on_readable(self) -> None:
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return
        self.reads.append(data)
        self.done.set()


def _watched(loop: reactor.Reactor) -> tuple[socket.socket, socket.socket, Reading, list[bytes], threading.Event]:
    """A socket pair whose first end a fresh handler reads, registered with ``loop``."""
    ours, theirs = socket.socketpair()
    reads: list[bytes] = []
    done = threading.Event()
    handler = Reading(ours, reads, done)
    loop.register(handler)
    return ours, theirs, handler, reads, done


def _settled(loop: reactor.Reactor) -> None:
    """Return once the loop has run what was asked of it before."""
    ran = threading.Event()
    loop.call_soon(ran.set)
    assert ran.wait(10)


def _finish(loop: reactor.Reactor, handler: Reading, *socks: socket.socket) -> None:
    """Unregister, then close: a handler left registered on a socket whose peer is gone is
    ready for good, and its loop (a daemon thread, never stopped) would spin on it for the
    rest of the test run."""
    loop.unregister(handler)
    _settled(loop)
    for sock in socks:
        sock.close()


def test_a_peer_that_hangs_up_is_served_and_reads_the_end_of_stream():
    loop = reactor.Reactor("test-handlers")
    _, theirs, handler, reads, done = _watched(loop)
    _settled(loop)
    theirs.close()
    assert done.wait(10)
    loop.unregister(handler)
    _settled(loop)
    assert reads[0] == b""


def test_a_handler_registered_twice_is_served_once_per_readiness():
    loop = reactor.Reactor("test-handlers")
    _, theirs, handler, reads, done = _watched(loop)
    loop.register(handler)
    _settled(loop)
    theirs.send(b"once")
    assert done.wait(10)
    _settled(loop)
    assert reads == [b"once"]
    _finish(loop, handler, handler.sock, theirs)


def test_unregistering_a_stale_handler_leaves_the_descriptors_new_owner_registered():
    loop = reactor.Reactor("test-handlers")
    ours, theirs, stale, _, _ = _watched(loop)
    loop.unregister(stale)
    _settled(loop)
    reads: list[bytes] = []
    done = threading.Event()
    current = Reading(ours, reads, done)  # the same descriptor, a handler of its own
    loop.register(current)
    loop.unregister(stale)  # a late unregister by the old owner
    _settled(loop)
    theirs.send(b"still served")
    assert done.wait(10)
    assert reads == [b"still served"]
    _finish(loop, current, ours, theirs)


class Exits(Reading):
    """Raises SystemExit once, after reading (a handler that a bad request made exit)."""

    def on_readable(self) -> None:
        super().on_readable()
        if len(self.reads) == 1:
            raise SystemExit(3)


def test_a_handler_raising_system_exit_leaves_the_io_thread_running(capsys):
    loop = reactor.Reactor(name="exits-test")
    ours, theirs = socket.socketpair()
    reads: list[bytes] = []
    done = threading.Event()
    handler = Exits(ours, reads, done)
    loop.register(handler)
    theirs.sendall(b"x")
    assert done.wait(10)
    _settled(loop)  # the loop still runs callbacks: the thread lived on
    done.clear()
    theirs.sendall(b"y")
    assert done.wait(10) and reads == [b"x", b"y"]
    assert "I/O handler" in capsys.readouterr().err
    _finish(loop, handler, ours, theirs)
