"""A fork server for proc servers: one warm process that forks a new proc in milliseconds.

Starting Python and importing procmesh costs ~0.13 s of CPU per proc; on a 2-core machine that
makes 8 procs take over half a second. The zygote pays it once: it imports the proc server
(never torch, never a thread), then for each request forks a child that takes the requested
environment and serves. It is used only for the default proc-server command with environment
changes that do not affect interpreter start-up (:func:`.zygote_client.eligible`); anything else is exec'd.

Protocol, one JSON line each way: the controller writes ``{"id", "env"}`` to the zygote's stdin;
the zygote answers ``{"id", "pid"}``, the child ``{"id", "address"}``, and the zygote reports
``{"id", "exit"}`` (a waitpid returncode) when a child ends. End of stdin (the controller died)
makes the zygote terminate its children and exit.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any


def _child(request: dict[str, Any], report_fd: int, stdout_fd: int, sigint: Any, zygote: int) -> None:
    """In the forked child: take the requested env and become a proc server."""
    signal.signal(signal.SIGINT, sigint)  # a Ctrl-C ends it as it ends an exec'd proc server
    os.dup2(stdout_fd, 1)
    os.close(stdout_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(request["env"])
    _die_with_parent(zygote)
    from mesh_client._src.runtime import waits
    from mesh_client._src.server import config as config_mod
    from mesh_client._src.server import logging_mode, output
    from mesh_client._src.server import main as server_main

    output.write_whole_lines(flush=False)
    logging_mode.start()

    try:
        waits.configure()  # the spin of the proc's own PROCMESH_SPIN_US and CPUs, not the zygote's
        cfg = config_mod.from_env(os.environ)
    except ValueError as exc:  # a ConfigError, or a bad PROCMESH_SPIN_US: each says what to give
        print(f"procmesh proc server: {exc}", file=sys.stderr, flush=True)
        os._exit(2)
    code = server_main.serve(cfg, announce=(report_fd, request["id"]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _die_with_parent(zygote: int) -> None:
    """Ask the kernel for SIGTERM when the zygote goes (it goes when the controller does);
    a zygote gone before the request was made sends none, so end now."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != zygote:
        os._exit(0)


def serve_forks() -> None:
    """The zygote's loop: requests on stdin, reports on stdout, children reaped as they end."""
    from mesh_client._src.server import dispatch, main  # noqa: F401  (load before forking)

    stdout_fd = int(os.environ.pop("PROCMESH_ZYGOTE_STDOUT"))
    report_fd = os.dup(1)  # fd 1 becomes the real stdout in children
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # A Ctrl-C at the terminal signals the whole process group: the zygote must live on (it ends
    # with the controller, at the end of its stdin), or every forked proc would be reported
    # killed with it, whatever really ended each one. Its children get the disposition back.
    sigint = signal.signal(signal.SIGINT, signal.SIG_IGN) or signal.SIG_DFL
    children: dict[int, int] = {}
    pending = b""

    def write(obj: dict[str, Any]) -> None:
        os.write(report_fd, (json.dumps(obj) + "\n").encode())

    while True:
        try:
            ready, _, _ = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                ident = children.pop(pid, None)
                if ident is not None:
                    write({"id": ident, "exit": os.waitstatus_to_exitcode(status)})
        if 0 in ready:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                zygote = os.getpid()
                pid = os.fork()
                if pid == 0:
                    try:
                        os.close(wake_r)
                        os.close(wake_w)
                        _child(request, report_fd, stdout_fd, sigint, zygote)
                    finally:
                        os._exit(70)
                children[pid] = request["id"]
                write({"id": request["id"], "pid": pid})
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    serve_forks()
