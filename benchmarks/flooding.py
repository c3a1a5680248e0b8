"""Hostile-connection floods against one local proc server, for benchmarks/faults.py and the
flood tests (tests/integration/local/test_flood.py).

Pieces: a bootstrap command that starts a proc server with a lowered ``RLIMIT_NOFILE`` and its
error output in a file; readers of a process's RSS, CPU time and listening port from /proc; and
the flooder itself, run as a separate process (``python -m benchmarks.flooding``) so that it
competes with the proc server for CPU, not with the measuring client for the GIL.

The flooder only ever connects to 127.0.0.0/8 and is bounded in connections and seconds. It
cycles through five kinds of connection, none of which holds the token:

- ``probe``: connect and close at once with nothing sent (a readiness probe);
- ``garbage``: an HTTP request instead of a frame;
- ``oversized``: a frame header announcing a 1 TiB AUTH frame;
- ``wrong-token``: a well-formed AUTH with a MAC made from the wrong token;
- ``idle``: connect and send nothing; up to ``--hold`` of these stay open at once.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import resource
import selectors
import socket
import struct
import sys
import time
from typing import Any

# Started as the proc's program: lower the descriptor limit, send stderr to a file, then run
# the proc server exactly as ``python -m mesh_client.proc_server`` would.
WRAPPER = """
import os, resource, runpy
limit = os.environ.pop("FAULTS_NOFILE", "")
if limit:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limit), hard if int(limit) <= hard else int(limit)))
log = os.environ.pop("FAULTS_STDERR", "")
if log:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
runpy.run_module("mesh_client.proc_server", run_name="__main__")
"""

KINDS = ("probe", "garbage", "oversized", "wrong-token", "idle")


def proc_command(nofile: int | None, stderr_path: str, env: dict[str, str] | None = None) -> Any:
    """A BootstrapCommand for a proc server limited to ``nofile`` descriptors, logging to a file."""
    from mesh_client import BootstrapCommand

    extra = {"FAULTS_STDERR": stderr_path, **(env or {})}
    if nofile is not None:
        extra["FAULTS_NOFILE"] = str(nofile)
    return BootstrapCommand(program=sys.executable, args=("-c", WRAPPER), env=extra)


# Reading a process from /proc ------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmHWM") * 1024


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def listening_port(pid: int) -> int:
    """The TCP port the process listens on (its only listening socket on IPv4)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                return int(parts[1].split(":")[1], 16)
    raise LookupError(f"process {pid} has no listening IPv4 socket")


def accept_backlog(pid: int, port: int) -> int:
    """Connections waiting in the accept queue of the process's TCP listener on ``port``: a
    proc that has taken none of a burst yet also holds no descriptor for it."""
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].split(":")[1], 16) == port:  # rx_queue of a LISTEN socket
                return int(parts[4].split(":")[1], 16)
    raise LookupError(f"process {pid} has no IPv4 listener on port {port}")


# The flooder -------------------------------------------------------------------------------

# A frame header (magic, version 1, kind AUTH, one segment) and one segment length.
_HEADER = struct.Struct("!2sBBHHQ")


def _payload(kind: str) -> bytes:
    if kind == "garbage":
        return b"GET / HTTP/1.1\r\nHost: proc\r\n\r\n"
    if kind == "oversized":
        return _HEADER.pack(b"PM", 1, 2, 1, 0, 1 << 40)
    if kind == "wrong-token":
        return _HEADER.pack(b"PM", 1, 2, 1, 0, 64) + os.urandom(64)
    return b""


def _abort(sock: socket.socket) -> None:
    """Close with a reset: no TIME_WAIT left behind, so 10^5 connections fit the port range."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def flood(port: int, connections: int, *, hold: int = 300, inflight: int = 128, deadline: float = 120.0) -> dict[str, Any]:
    """Open ``connections`` hostile connections to 127.0.0.1:``port`` (bounded by ``deadline`` s)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hold + inflight + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    selector = selectors.DefaultSelector()
    idle: collections.deque[socket.socket] = collections.deque()
    counts = collections.Counter[str]()
    started = time.monotonic()
    end = started + deadline
    made = 0
    pending: dict[socket.socket, tuple[str, float]] = {}
    while (made < connections or pending) and time.monotonic() < end:
        while made < connections and len(pending) < inflight:
            kind = KINDS[made % len(KINDS)]
            made += 1
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            # Spread the connections over source addresses of 127/8 so 4-tuples never run out.
            sock.bind((f"127.0.{(made // 250) % 250}.{2 + made % 250}", 0))
            code = sock.connect_ex(("127.0.0.1", port))
            if code not in (0, errno.EINPROGRESS):
                counts["connect-failed"] += 1
                sock.close()
                continue
            pending[sock] = (kind, time.monotonic() + 2.0)
            selector.register(sock, selectors.EVENT_WRITE)
        for key, _ in selector.select(0.05):
            sock = key.fileobj  # type: ignore[assignment]
            kind, _ = pending.pop(sock)
            selector.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                counts["connect-failed"] += 1
                sock.close()
                continue
            counts[kind] += 1
            if kind == "idle":
                idle.append(sock)
                if len(idle) > hold:
                    _abort(idle.popleft())
                continue
            data = _payload(kind)
            if data:
                try:
                    sock.send(data)
                except OSError:
                    pass
            if kind == "probe":
                sock.close()  # an orderly close, as a TCP probe does
            else:
                _abort(sock)
        now = time.monotonic()
        for sock, (_kind, until) in list(pending.items()):
            if until < now:  # the server's backlog is full: give up on this one
                del pending[sock]
                selector.unregister(sock)
                counts["connect-timeout"] += 1
                _abort(sock)
    for sock in pending:
        _abort(sock)
    while idle:
        _abort(idle.popleft())
    return {"attempted": made, "seconds": time.monotonic() - started, **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description="hostile connections to a local proc server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, default=100_000)
    parser.add_argument("--hold", type=int, default=300, help="idle connections kept open at once")
    parser.add_argument("--deadline", type=float, default=120.0, help="stop after this many seconds")
    args = parser.parse_args()
    print(json.dumps(flood(args.port, args.connections, hold=args.hold, deadline=args.deadline)), flush=True)


if __name__ == "__main__":
    main()
