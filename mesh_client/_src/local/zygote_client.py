"""The controller's side of the zygote (:mod:`.zygote`): start it once, ask it for procs, and
follow its reports (pid, address, exit status) on a reader thread."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

#: How long the reader waits for the zygote to exit once its stdout closed (it closes as it exits).
ZYGOTE_EXIT_WAIT = 5.0
# Variables read while Python starts: a child forked from the zygote would ignore them.
STARTUP_PREFIXES = ("PYTHON", "LD_", "MALLOC_", "OMP_", "KMP_", "GLIBC_")


def eligible(argv: list[str], program: str, default_argv: list[str], env_changes: Mapping[str, str | None], inherit_env: bool) -> bool:
    """Whether a proc with this command can be forked from the zygote instead of exec'd."""
    if os.environ.get("PROCMESH_ZYGOTE", "1") == "0" or not inherit_env:
        return False
    if program != sys.executable or argv[1:] != default_argv[1:]:
        return False
    return not any(key.startswith(STARTUP_PREFIXES) for key in env_changes)


class ForkedProc:
    """A proc forked by the zygote; offers what the launcher needs from a ``Popen``."""

    def __init__(self, server: ZygoteClient, ident: int) -> None:
        self._server = server
        self.ident = ident
        self.pid: int | None = None
        self.address: str | None = None
        self.returncode: int | None = None
        # Set when the zygote ended while this proc was known to run: (the zygote's pid, its
        # waitpid returncode). The proc's own status is then unknown (the kernel sent it
        # SIGTERM: PR_SET_PDEATHSIG), so it is reported as ended with the zygote.
        self.lost_with_zygote: tuple[int, int] | None = None
        self.args = ["(forked proc server)"]
        self.stdin = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._server.changed:
            if not self._server.changed.wait_for(lambda: self.returncode is not None, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        with self._server.changed:
            self._server.changed.wait_for(lambda: self.pid is not None or self.returncode is not None, 10)
        if self.pid is not None and self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ZygoteClient:
    """One zygote per controller process, started on first use."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._procs: dict[int, ForkedProc] = {}
        self._next = 0
        self._write_lock = threading.Lock()
        stdout = os.dup(1)
        env = dict(os.environ, PROCMESH_ZYGOTE_STDOUT=str(stdout))
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "mesh_client._src.local.zygote"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                pass_fds=(stdout,),
            )
        finally:
            os.close(stdout)
        self._pid = os.getpid()
        threading.Thread(target=self._read_reports, daemon=True, name="procmesh-zygote").start()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None and self._pid == os.getpid()

    def fork(self, env: dict[str, str]) -> ForkedProc:
        with self.changed:
            self._next += 1
            proc = self._procs[self._next] = ForkedProc(self, self._next)
        line = json.dumps({"id": proc.ident, "env": env}) + "\n"
        with self._write_lock:
            assert self._process.stdin is not None
            self._process.stdin.write(line.encode())
            self._process.stdin.flush()
        return proc

    def _read_reports(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            report: dict[str, Any] = json.loads(line)
            with self.changed:
                proc = self._procs.get(report["id"])
                if proc is None:
                    continue
                if "pid" in report:
                    proc.pid = report["pid"]
                if "address" in report:
                    proc.address = report["address"]
                if "exit" in report:
                    proc.returncode = report["exit"]
                    del self._procs[proc.ident]
                self.changed.notify_all()
        # The zygote is gone (its stdout closes only as it exits), and its children with it:
        # reap it now, not when the next spawn finds it dead, so it is no zombie meanwhile.
        try:
            code = self._process.wait(timeout=ZYGOTE_EXIT_WAIT)
        except subprocess.TimeoutExpired:  # it closed its stdout and lives on: no use, end it
            self._process.kill()
            code = self._process.wait()
        ended = (self._process.pid, code)
        with self.changed:
            for proc in self._procs.values():
                if proc.returncode is None:
                    proc.lost_with_zygote = ended
                    proc.returncode = -signal.SIGTERM  # what PR_SET_PDEATHSIG sends it
            self._procs.clear()
            self.changed.notify_all()


_client: ZygoteClient | None = None
_client_lock = threading.Lock()


def get_zygote() -> ZygoteClient:
    global _client
    with _client_lock:
        if _client is None or not _client.alive:
            _client = ZygoteClient()
        return _client

