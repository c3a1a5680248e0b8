"""What an owned host mesh's ``stop()`` and ``shutdown()`` must stop: the proc meshes it
spawned, and the spawns still waiting for theirs, which Monarch drains before it stops (their
procs are stopped once up); and the order of the stops, which may come from two threads at
once: a stop finishes only after the one taken before it (unless taken on the thread that runs
that one, by a signal handler that interrupted it). Thread-safe; used by the host meshes
(:mod:`..kubernetes.host_mesh`, :mod:`..local.workers`), whose stops go off the event loop
(:func:`~mesh_client._src.runtime.offloading.off_the_loop`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator

from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.runtime import futures, offloading
from mesh_client._src.runtime.futures import Future

#: What a stop waits for besides the spawns in flight: the meshes spawned before it, stopped by it.
OWN = -1


class Stopping:
    """One ``stop()`` or ``shutdown()``: done once its own meshes and the spawns in flight when
    it came have stopped, with the first failure among them; finished (the future its caller
    holds) once, besides, the stop taken before it has finished and the host mesh's last step
    is done (:meth:`Spawns.finish`)."""

    def __init__(self, waiting: set[int], before: Future[None] | None) -> None:
        self.waiting = waiting
        self.failure: BaseException | None = None
        self.done: Future[None] = Future(None)
        self.before = before  # the finished future of the stop taken just before, if not finished then
        self.finished: Future[None] = Future(None)


class Spawns:
    """A host mesh's spawned meshes and spawns in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._in_flight: set[int] = set()
        self._meshes: list[ProcMesh] = []  # spawned and up, unless stopped by their own stop()
        self._stoppings: list[Stopping] = []  # those still waiting for a spawn in flight
        self._last: Stopping | None = None  # the stop taken last: the next one finishes after it
        self._shutdown: Stopping | None = None
        self._here = threading.local()  # .depth: this thread runs a stop's blocking part (how deep)

    @property
    def shut_down(self) -> bool:
        return self._shutdown is not None

    def begin(self) -> int | None:
        """A spawn starts: its id, or None once shut down (no more spawns)."""
        with self._lock:
            if self._shutdown is not None:
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
        and settle each of them with the stop's failure, if any (a Ctrl-C too, raised here)."""
        failure: BaseException | None = None
        try:
            with self._stops_here():
                mesh.stop(reason).get()
        except BaseException as exc:  # the stop's future raises it
            failure = _failure(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            for stopping in late:
                self.settle(stopping, spawn, failure)

    def take(self, shutdown: bool) -> tuple[list[ProcMesh], Stopping] | None:
        """A stop (``shutdown``: and no more spawns): the meshes to stop now, and the stop, which
        waits for them (:data:`OWN`) and for the spawns now in flight. None once shut down: as
        Monarch's, a host mesh shut down refuses a second ``shutdown()`` and a ``stop()``."""
        with self._lock:
            if self._shutdown is not None:
                return None
            return self._take(shutdown)

    def shutdown_once(self) -> tuple[list[ProcMesh], Stopping] | Future[None]:
        """``take(shutdown=True)``, or once shut down, that shutdown's future: one step, so that
        two ``async with`` exits racing shut down once, and both wait for it."""
        with self._lock:
            if self._shutdown is not None:
                return self._shutdown.finished
            return self._take(True)

    def refusal(self, error: RuntimeError) -> Future[None]:
        """The future of a stop or shutdown refused after :meth:`take` said shut down: it raises
        ``error`` once that shutdown has finished, since a caller's future completes only when
        the meshes are gone."""
        shutdown = self._shutdown
        assert shutdown is not None, "refused only once shut down"
        if self._stopping_here():  # its shutdown goes on only once this caller returns
            return futures.failed(error)
        refused: Future[None] = Future(None)

        def refuse(_: Future[None]) -> None:
            refused.set_exception(error)

        shutdown.finished.add_done_callback(refuse)
        return refused

    def _take(self, shutdown: bool) -> tuple[list[ProcMesh], Stopping]:
        last = self._last
        # Not after a stop that this thread runs (a signal handler interrupted it): that one goes
        # on only once this caller returns, and a wait for it would never end.
        before = None if last is None or last.finished.done() or self._stopping_here() else last.finished
        stopping = Stopping({OWN, *self._in_flight}, before)
        self._last = stopping
        if shutdown:
            self._shutdown = stopping
        meshes, self._meshes = self._meshes, []
        self._stoppings.append(stopping)
        return meshes, stopping

    def stop_own(self, stopping: Stopping, meshes: list[ProcMesh], reason: str) -> None:
        """Stop ``meshes``, those ``stopping`` took, newest first (as ``shutdown_context()``),
        each whatever became of the others; settle its :data:`OWN` with the first failure. A
        Ctrl-C is raised to this caller, and settles it too: the stops after it wait for it."""
        failure: BaseException | None = None
        try:
            with self._stops_here():
                for mesh in reversed(meshes):
                    try:
                        mesh.stop(reason).get()
                    except Exception as exc:  # a proc out of reach: the others are stopped all the same
                        failure = failure or exc
        except BaseException as exc:
            failure = failure or _failure(exc)
            raise
        finally:
            self.settle(stopping, OWN, failure)

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

    def finish(self, stopping: Stopping, then: Callable[[], Future[None]] | None = None) -> Future[None]:
        """``stopping.finished``: completed once ``stopping`` is done, the stop taken before it
        has finished (a second stop's future completing while the first still deleted, or its
        ``then`` ending the agents the first stopped procs through, was a race) and ``then()``
        (what the host mesh does last, whatever became of the rest) is done; with the first
        failure of the three, so that each caller hears of a mesh that could not be stopped."""
        def complete(failure: BaseException | None) -> None:
            if failure is None:
                stopping.finished.set_result(None)
            else:
                stopping.finished.set_exception(failure)

        def last() -> None:  # where blocking is allowed: then() may wait for procs to end
            failure = _failure_of(stopping.done)
            if stopping.before is not None:
                failure = failure or _failure_of(stopping.before)
            if then is None:
                complete(failure)
                return
            try:
                with self._stops_here():
                    ending = then()
            except BaseException as exc:  # the future raises it, as then()'s own would
                complete(failure or _failure(exc))
                if not isinstance(exc, Exception):  # a Ctrl-C: also this thread's to raise
                    raise
                return
            ending.add_done_callback(lambda _: complete(failure or _failure_of(ending)))

        def go_on(_: Future[None]) -> None:  # on the thread that completed a future: perhaps a loop's or the I/O thread
            offloading.off_the_loop(last, name="procmesh-host-stop")

        before = stopping.before
        stopping.done.add_done_callback(go_on if before is None else lambda _: before.add_done_callback(go_on))
        return stopping.finished

    @contextlib.contextmanager
    def _stops_here(self) -> Iterator[None]:
        """Mark this thread as running a stop's blocking part, for :meth:`_stopping_here`."""
        self._here.depth = getattr(self._here, "depth", 0) + 1
        try:
            yield
        finally:
            self._here.depth -= 1

    def _stopping_here(self) -> bool:
        """Whether this thread is inside a stop's blocking part (re-entered by a signal handler)."""
        return bool(getattr(self._here, "depth", 0))


def _failure_of(fut: Future[None]) -> Exception | None:
    """What ``fut``, done, raised (None: it succeeded), as :func:`_failure` hands it on."""
    error = fut.exception(timeout=0)
    return None if error is None else _failure(error)


def _failure(error: BaseException) -> Exception:
    """What a stop's future raises for ``error``: itself, or, for a Ctrl-C (KeyboardInterrupt,
    raised to the thread it came to), a RuntimeError saying that the stop was cut short: the
    callers of the stops after it were not interrupted, and some meshes may be left."""
    if isinstance(error, Exception):
        return error
    return RuntimeError(f"a stop of this host mesh was interrupted ({type(error).__name__}) "
                        "before it had stopped every proc mesh it took: stop those meshes yourself")
