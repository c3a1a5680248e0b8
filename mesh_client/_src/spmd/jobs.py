"""One SPMD job per proc at a time: what ``SPMDActor.main`` holds while its script runs.

A script's torchelastic environment, its ``sys.argv`` and torch.distributed's default process
group are one per process, not one per actor. Two ``main`` calls in one proc at once (two SPMD
actor meshes on one proc mesh) shared them: seen, the first job's script read the second's
arguments and master port, both joined the second's store, and both ``main`` returned True
with the first job's work never done. So :func:`claim` refuses a second job while one runs in
the proc, naming it. A job holds the proc from its ``main`` until the group its script left is
ended (:mod:`.process_groups`, just after the reply): a job whose ``main`` returned is only
waited for (at most :data:`ENDING_WAIT_SECONDS`), so running jobs one after another on one proc
mesh never meets the last one's group. ``setup_env`` of another actor
(``setup_torch_elastic_env``) is refused while a job runs: it would rewrite its environment.
Used by :mod:`.actor`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator

#: How long a new job waits for the last one's process group to end once its ``main`` returned.
ENDING_WAIT_SECONDS = 60.0


@dataclasses.dataclass
class _Job:
    actor_id: str
    what: str
    ending: bool = False  # its main returned; its group is being ended


_changed = threading.Condition()
class _Proc:
    """This proc's job, if any (read and written under ``_changed``)."""

    job: _Job | None = None


_proc = _Proc()


class JobRunning(RuntimeError):
    """Another SPMD job runs in this proc (its script has not ended, or its group not yet)."""


def _refusal(doing: str, job: _Job) -> JobRunning:
    state = "is still ending its process group" if job.ending else "is still running"
    return JobRunning(
        f"{doing}: SPMD job {job.what} {state} in this proc. A proc runs one SPMD job at a time: "
        "torch.distributed's default process group, the torchelastic environment (RANK, MASTER_PORT, ...) "
        "and sys.argv are one per process, so two jobs would share them. Wait for that job "
        "(its main.call().get()), or run this one on procs of another proc mesh")


def _other(actor_id: str) -> _Job | None:
    job = _proc.job
    return job if job is not None and job.actor_id != actor_id else None


def _running_other(actor_id: str, doing: str) -> None:
    """Raise :class:`JobRunning` if another actor's job holds the proc, once one that is
    ending had its while to end. Called under ``_changed``."""
    def settled() -> bool:
        job = _other(actor_id)
        return job is None or not job.ending

    _changed.wait_for(settled, timeout=ENDING_WAIT_SECONDS)
    job = _other(actor_id)
    if job is not None:
        raise _refusal(doing, job)


def claim(actor_id: str, what: str) -> None:
    """Hold this proc for ``actor_id``'s job ``what``; raises :class:`JobRunning` if another
    job runs here (one that is ending is waited for first)."""
    with _changed:
        _running_other(actor_id, f"cannot start {what}")
        _proc.job = _Job(actor_id, what)


def ending(actor_id: str) -> None:
    """``actor_id``'s script ended; its group is ended next, then :func:`release`."""
    with _changed:
        job = _proc.job
        if job is not None and job.actor_id == actor_id:
            job.ending = True


def release(actor_id: str) -> None:
    """Let the next job run here (a no-op unless ``actor_id`` holds the proc)."""
    with _changed:
        job = _proc.job
        if job is not None and job.actor_id == actor_id:
            _proc.job = None
            _changed.notify_all()


@contextlib.contextmanager
def free(actor_id: str, doing: str) -> Iterator[None]:
    """Raise :class:`JobRunning` if a job of another actor than ``actor_id`` runs here, else
    run the body with no job able to start meanwhile (it writes what a job reads)."""
    with _changed:
        _running_other(actor_id, doing)
        yield
