"""Monarch's ``shutdown_context()``: stop every proc mesh this process made, once.

The backends register each mesh they make (local ``spawn_procs``, ``attach_to_workers`` hosts'
``spawn_procs``, Kubernetes ``spawn_procs`` and ``attach``) with :func:`made`; ``stop()`` takes
it off again. The first ``shutdown_context()`` stops the rest, newest first, on a thread of its
own, so the work goes on if its future is dropped; later calls get a done future, as in
Monarch. Stopping is what ``stop()`` does: local procs end (killed 5 s after they were asked),
a Kubernetes mesh this client created is deleted, an attached one is let go.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

from mesh_client._src.runtime import futures
from mesh_client._src.runtime.futures import Future

if TYPE_CHECKING:
    from mesh_client._src.actor.proc_mesh import ProcMesh

_meshes: dict[int, ProcMesh] = {}  # id -> mesh, in the order made
_lock = threading.Lock()
_claimed = False


def made(mesh: ProcMesh) -> None:
    with _lock:
        _meshes[id(mesh)] = mesh


def forget(mesh: ProcMesh) -> None:
    with _lock:
        _meshes.pop(id(mesh), None)


def shutdown_context(host_timeout: float | None = None) -> Future[None]:
    """Stop every proc mesh this process made and has not stopped; the future completes when
    they are gone (with the first error, if a stop failed). ``host_timeout`` is checked as
    Monarch checks it (finite, not negative); here each local proc is given 5 s to end, as at
    every ``stop()``."""
    global _claimed
    if host_timeout is not None and (not math.isfinite(host_timeout) or host_timeout < 0 or host_timeout >= 2**64):
        raise ValueError("host_timeout must be finite, non-negative and less than 2**64 seconds")
    with _lock:
        if _claimed:
            return futures.completed(None)
        _claimed = True
        meshes = list(_meshes.values())
    done: Future[None] = Future(None)

    def stop_all() -> None:
        first: BaseException | None = None
        for mesh in reversed(meshes):
            try:
                mesh.stop("shutdown_context()").get()
            except BaseException as exc:  # noqa: BLE001 - the others are stopped all the same
                first = first or exc
        if first is not None:
            done.set_exception(first)
        else:
            done.set_result(None)

    threading.Thread(target=stop_all, name="procmesh shutdown_context").start()
    return done
