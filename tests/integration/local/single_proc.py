"""One local proc server for the admission and flood tests: optional ``RLIMIT_NOFILE``, extra
``PROCMESH_*`` settings, its error output in a file, and bounded waits on what it does."""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks import flooding
from mesh_client import this_host
from tests.integration.local.actors import Recorder


@dataclasses.dataclass
class SingleProc:
    mesh: Any
    actor: Any  # a Recorder on the proc, already connected
    pid: int
    port: int
    log: pathlib.Path

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@contextlib.contextmanager
def single_proc(tmp_path: pathlib.Path, *, nofile: int | None = None, env: dict[str, str] | None = None) -> Iterator[SingleProc]:
    log = tmp_path / "proc.stderr"
    command = flooding.proc_command(nofile, str(log), env)
    # The proc's stderr goes to ``log``, read line by line: no "[lone rank 0] " prefix there.
    with this_host().spawn_procs(per_host={"procs": 1}, name="lone", bootstrap_command=command,
                                 forward_output=False) as mesh:
        actor = mesh.spawn("rec", Recorder).slice(procs=0)
        pid = actor.where.call_one().get(timeout=30)["pid"]
        yield SingleProc(mesh, actor, pid, flooding.listening_port(pid), log)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` (bounded); fail naming ``what`` if it never holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
