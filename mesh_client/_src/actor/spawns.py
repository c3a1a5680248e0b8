"""What an owned host mesh's ``stop()`` and ``shutdown()`` must stop: the proc meshes it
spawned, and the spawns still waiting for theirs, which Monarch drains before it stops (their
procs are stopped once up). Bookkeeping alone, thread-safe; the host meshes stop the meshes
(:mod:`..kubernetes.host_mesh`, :mod:`..local.workers`).
"""

from __future__ import annotations

import itertools
import threading

from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.runtime.futures import Future

#: What a stop waits for besides the spawns in flight: the meshes spawned before it, stopped by it.
OWN = -1


class Stopping:
    """One ``stop()`` or ``shutdown()``: done once its own meshes and the spawns in flight when
    it came have stopped, with the first failure among them."""

    def __init__(self, waiting: set[int]) -> None:
        self.waiting = waiting
        self.failure: BaseException | None = None
        self.done: Future[None] = Future(None)


class Spawns:
    """A host mesh's spawned meshes and spawns in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._in_flight: set[int] = set()
        self._meshes: list[ProcMesh] = []  # spawned and up, unless stopped by their own stop()
        self._stoppings: list[Stopping] = []  # those still waiting for a spawn in flight
        self.shut_down = False

    def begin(self) -> int | None:
        """A spawn starts: its id, or None once shut down (no more spawns)."""
        with self._lock:
            if self.shut_down:
                return None
            spawn = next(self._ids)
            self._in_flight.add(spawn)
            return spawn

    def end(self, spawn: int, mesh: ProcMesh | None) -> list[Stopping]:
        """A spawn ends, with its mesh (None: it failed). Returns the stops that came while it
        waited for its mesh, which is theirs to stop (then :meth:`settle` each); none: the mesh
        is kept."""
        with self._lock:
            self._in_flight.discard(spawn)
            late = [s for s in self._stoppings if spawn in s.waiting]
            if mesh is not None and not late:
                self._meshes = [m for m in self._meshes if not m._stopped] + [mesh]
        if mesh is None:  # nothing of it to stop
            for stopping in late:
                self.settle(stopping, spawn, None)
            return []
        return late

    def stop_late(self, spawn: int, late: list[Stopping], mesh: ProcMesh, reason: str) -> None:
        """Stop ``mesh``, the mesh of ``spawn`` that the stops ``late`` (from :meth:`end`) took,
        and settle each of them with the stop's failure, if any."""
        failure: BaseException | None = None
        try:
            mesh.stop(reason).get()
        except Exception as exc:  # the stop's future raises it
            failure = exc
        for stopping in late:
            self.settle(stopping, spawn, failure)

    def take(self, shutdown: bool) -> tuple[list[ProcMesh], Stopping] | None:
        """A stop (``shutdown``: and no more spawns): the meshes to stop now, and the stop, which
        waits for them (:data:`OWN`) and for the spawns now in flight. None once shut down: as
        Monarch's, a host mesh shut down refuses a second ``shutdown()`` and a ``stop()``."""
        with self._lock:
            if self.shut_down:
                return None
            self.shut_down = shutdown
            meshes, self._meshes = self._meshes, []
            stopping = Stopping({OWN, *self._in_flight})
            self._stoppings.append(stopping)
            return meshes, stopping

    def settle(self, stopping: Stopping, member: int, failure: BaseException | None) -> None:
        """``member`` (:data:`OWN` or a spawn) of ``stopping`` has stopped; the last completes it."""
        with self._lock:
            stopping.waiting.discard(member)
            stopping.failure = stopping.failure or failure
            if stopping.waiting:
                return
            self._stoppings.remove(stopping)
        if stopping.failure is None:
            stopping.done.set_result(None)
        else:
            stopping.done.set_exception(stopping.failure)
