"""Background processes that outlive the launcher, tracked by pid files.

Each process runs in its own session (so it survives the shell that ran ``up`` and can be
signalled as a group) with stdout and stderr in a log file. A pid file records the pid and the
kernel's start time of the process, so a stale file never makes us signal a recycled pid.
Used by :mod:`tests.cluster.controlplane` and by the process node for its containers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/pid/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return fields[19]


def write_pidfile(pidfile: Path, pid: int) -> None:
    """Record ``pid`` with its start time."""
    pidfile.write_text(f"{pid} {start_time(pid) or ''}\n")


def read_pidfile(pidfile: Path) -> int | None:
    """The pid recorded in ``pidfile`` if that very process still runs, else None."""
    try:
        pid_text, _, started = pidfile.read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    current = start_time(pid)
    return pid if current is not None and current == started else None


def _listening_inodes(pid: int, port: int) -> set[str]:
    """Inodes of the sockets listening on TCP ``port`` in ``pid``'s network namespace
    (``/proc/<pid>/net/tcp`` and ``tcp6``: a real node's control plane runs in a namespace of
    its own, and Go serves ``0.0.0.0`` from a dual-stack IPv6 socket)."""
    rows: list[str] = []
    for table in ("tcp", "tcp6"):
        try:
            rows += Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            pass
    found = set()
    for row in rows:
        fields = row.split()
        if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            found.add(fields[9])  # state 0A: LISTEN
    return found


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds the socket listening on ``port``: a health check
    that another process on a port picked free a moment before answers proves nothing."""
    inodes = _listening_inodes(pid, port)
    if not inodes:
        return False
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith("socket:[") and target[len("socket:["):-1] in inodes:
            return True
    return False


def spawn(
    argv: list[str],
    pidfile: Path,
    logfile: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached in a new session, logging to ``logfile``, and record its pid;
    ``pass_fds`` stay open in the child (a node's slot lock)."""
    with open(logfile, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
            pass_fds=pass_fds,
        )
    write_pidfile(pidfile, proc.pid)
    return proc


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    return start_time(pid) is not None


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(pids: Iterable[int], grace: float = 10.0) -> None:
    """SIGTERM each process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
    pids = list(pids)
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for pid in pids:
            _reap(pid)
        if not any(alive(p) for p in pids):
            return
        time.sleep(0.05)
    _kill(pids)


def _kill(pids: list[int]) -> None:
    """SIGKILL each process group and wait (at most 5 s) until every one is gone."""
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        for pid in pids:
            _reap(pid)
        time.sleep(0.05)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def stop_pidfiles(pidfiles: Iterable[Path], grace: float = 10.0) -> None:
    """Stop the still-running processes named by ``pidfiles`` and remove the files."""
    pidfiles = list(pidfiles)
    pids = [p for p in (read_pidfile(f) for f in pidfiles) if p is not None]
    stop(pids, grace)
    for f in pidfiles:
        f.unlink(missing_ok=True)


def kill_pidfiles(pidfiles: Iterable[Path]) -> None:
    """SIGKILL the process groups named by ``pidfiles`` at once (no SIGTERM first: a crash, not
    a shutdown), wait until they are gone and remove the files."""
    pidfiles = list(pidfiles)
    _kill([p for p in (read_pidfile(f) for f in pidfiles) if p is not None])
    for f in pidfiles:
        f.unlink(missing_ok=True)
