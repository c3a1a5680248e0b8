"""Starting and stopping a proc server process (``python -m mesh_client.proc_server``).

It listens on TCP at its address and, when its local backend gave it a private directory
(``PROCMESH_UNIX_DIR``, :mod:`mesh_client._src.runtime.unixlinks`), on a unix socket there too,
whose file it removes when it stops; both listeners share one :class:`.dispatch.ProcServer`, so
the handshake and the flood limits are the same on each.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from mesh_client._src import contract
from mesh_client._src.runtime import natives, unixlinks
from mesh_client._src.server import config as config_mod
from mesh_client._src.server import finalizing, gpu, logging_mode, output
from mesh_client._src.server.dispatch import ProcServer

if TYPE_CHECKING:
    from mesh_client._src.actor.proc_mesh import ProcMesh


#: How often the main thread wakes to run signal handlers while it serves.
STOP_CHECK_SECONDS = 1.0
SIGTERM_REASON = "it received SIGTERM"


def serve(cfg: config_mod.ServerConfig, announce: tuple[int, int] | None = None, *, finalize: bool = True) -> int:
    """Listen, announce readiness, serve until STOP, SIGTERM or the lifeline closes.

    ``finalize``: the process ends next, so run its atexit handlers and module finalizers here
    (:mod:`.finalizing`); False for a worker loop that returns to the program
    (``run_worker_loop_until_shutdown``, ``start_worker_loop_forever``). SIGTERM stops the server
    only when it serves on the main thread (a signal handler can be set nowhere else)."""
    if finalize:  # a process that serves and ends (not a program's worker loop that returns to it)
        # The token is in cfg now: keep it out of the environment its actors' subprocesses
        # inherit (this process's own /proc/<pid>/environ keeps its start-up block).
        os.environ.pop(contract.TOKEN, None)
        os.environ.pop(contract.INCARNATION, None)  # nor this proc's id: a proc server it starts is another proc
        natives.never_warn()  # its program warned where the modules are missing
    for entry in cfg.sys_path:
        if entry not in sys.path:
            sys.path.append(entry)
    if cfg.memory_fraction is not None:
        gpu.apply_memory_fraction(cfg.memory_fraction)

    listener = _listen(cfg.host, cfg.port)
    host, port = listener.getsockname()[:2]
    # A pod's port-forward (containerd, CRI-O) dials localhost inside the pod's network namespace,
    # so a proc bound to its pod IP also listens on the pod's own loopback. Not where the "pod IP"
    # is itself a loopback address (local procs, the test cluster's process node): that loopback
    # is the host's, shared by every proc on it.
    also = [] if _is_loopback_or_any(host) else [_listen("127.0.0.1", port)]
    unix = _listen_unix(cfg.unix_dir, (host, port))
    if unix is not None:
        also.append(unix)

    stopping = threading.Event()
    why: list[str] = []  # what ended the proc, first cause first (for calls that come after)

    def stop_because(reason: str) -> Callable[..., None]:
        def stop(*_: object) -> None:
            why.append(reason)
            stopping.set()
        return stop

    incarnation = cfg.incarnation or uuid.uuid4().hex  # one for the server and its own mesh's reference
    this_proc = _this_proc_mesh(cfg, host, port, incarnation)
    server = ProcServer(
        listener,
        cfg.token,
        identity={"mesh": cfg.mesh, "rank": cfg.rank, "coords": cfg.coords, "address": f"{host}:{port}"},
        on_stop=lambda reason: stop_because(
            f"it was asked to stop ({reason})" if reason else
            "it was asked to stop (ProcMesh.stop(), or its controller's exit)")(),
        this_proc=this_proc,
        max_message_bytes=cfg.max_message_bytes,
        max_unauthenticated=cfg.max_unauthenticated,
        handshake_timeout=cfg.handshake_timeout,
        also_listening=also,
        incarnation=incarnation,
    )
    server.start()
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread:
        previous = signal.signal(signal.SIGTERM, stop_because(SIGTERM_REASON))
    if cfg.lifeline:
        threading.Thread(target=_watch_lifeline, args=(stop_because("its controller exited"),),
                         daemon=True, name="lifeline").start()
    if announce is not None:  # forked by the zygote: tell the controller through it
        fd, ident = announce
        os.write(fd, (json.dumps({"id": ident, "address": f"{host}:{port}"}) + "\n").encode())
        os.close(fd)
    elif cfg.ready_fd is not None:
        os.write(cfg.ready_fd, f"{host}:{port}\n".encode())
        os.close(cfg.ready_fd)
    else:
        print(f"procmesh: proc server {cfg.mesh}[{cfg.rank}] listening on {host}:{port}", file=sys.stderr, flush=True)

    try:
        # Woken each second: a SIGTERM the kernel delivered to another thread of this process
        # only marks Python's handler to run on this thread, which a longer wait would keep
        # sleeping (an orphaned proc then lived on for the wait, holding its controller's pipes).
        while not stopping.wait(STOP_CHECK_SECONDS):
            pass
    except KeyboardInterrupt:
        why.append("it received SIGINT")
    # The refusals counted since the last summary line: now, in case the proc is killed while
    # it stops, and again at the end for those that come meanwhile.
    server.flush_logs()
    if unix is not None:  # no new local connections from here; the ones open finish below
        unixlinks.bury((host, port), cfg.token)  # nor over TCP from its mesh: its port is free soon
    reason = why[0] if why else "it was asked to stop"
    if not finalize:  # the program goes on: its ports are free from here
        server.stop_listening()
    server.close_actors(reason)
    if finalize:
        finalizing.finalize()  # module-level finalizers run, as when a Monarch proc ends
    else:  # and this worker serves nothing more, and the program has its own SIGTERM handling again
        server.close_connections(f"the worker loop ended: {reason}")
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
    server.flush_logs()
    # 0 unless told otherwise (contract.SIGTERM_EXIT): a pod's proc says 143, as the cluster
    # stopped it; one a local controller or systemd stops with SIGTERM on purpose, 0.
    return cfg.sigterm_exit if finalize and reason == SIGTERM_REASON else 0


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(1024)
    return listener


def _listen_unix(directory: str | None, address: tuple[str, int]) -> socket.socket | None:
    """The unix listener beside TCP ``address``; None without a usable directory (a pod), or
    when it cannot be made (then local clients use TCP, which always works)."""
    if not unixlinks.use_directory(directory):  # this proc's own calls to local procs use it too
        return None
    try:
        return unixlinks.listen(address)
    except OSError as exc:
        print(f"procmesh: proc server at {address[0]}:{address[1]}: no unix socket in {directory} ({exc});"
              " local clients use TCP", file=sys.stderr, flush=True)
        return None


def _is_loopback_or_any(host: str) -> bool:
    address = ipaddress.ip_address(host)
    return address.is_loopback or address.is_unspecified


def _watch_lifeline(stop: Callable[[], None]) -> None:
    """The parent holds our stdin open; end of file means it died, so we go too."""
    try:
        while sys.stdin.buffer.read(1):
            pass
    except (OSError, ValueError):
        pass
    stop()


def _this_proc_mesh(cfg: config_mod.ServerConfig, host: str, port: int, incarnation: str) -> ProcMesh:
    from mesh_client._src.actor.proc_mesh import ProcMesh
    from mesh_client._src.actor.procs import ProcGroup
    from mesh_client._src.actor.shape import Shape

    connect_host = host if host not in ("0.0.0.0", "::") else "127.0.0.1"
    group = ProcGroup(cfg.mesh or "proc", [(connect_host, port)], cfg.token, [f"{cfg.mesh or 'proc'}[{cfg.rank}]"],
                      proc_ids=[incarnation])
    return ProcMesh(group, Shape([], []))


def main() -> None:
    output.write_whole_lines()
    logging_mode.start()
    try:
        cfg = config_mod.from_env(os.environ)
    except config_mod.ConfigError as exc:
        print(f"procmesh proc server: {exc}", file=sys.stderr)
        sys.exit(2)
    code = serve(cfg)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

