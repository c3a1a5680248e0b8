"""A per-mesh work queue: many triggers, one reconcile at a time per mesh, coalesced.

kopf delivers events per object, so the pods of one mesh would otherwise reconcile the mesh
concurrently. :class:`WorkQueue` keeps one worker task per key: a trigger marks the key dirty;
the worker reconciles until the key stays clean, so a burst of pod events costs one or two
reconciles. Failures are retried with exponential backoff; a worker may ask to be run again
after a delay. Made and fed by :class:`~procmesh_operator.reconciling.Controller` (from the events
:mod:`.handlers` passes it), whose reconcile is the worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Hashable

logger = logging.getLogger(__name__)

BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
#: The longest wait that batches a key's events after a run of it (see _run).
BATCH_MAX = 1.0
#: A key waits this many times the (wall) length of its last run, at most BATCH_MAX, before it
#: runs again, its events batched meanwhile. So one busy key whose runs take up to
#: BATCH_MAX / BATCH_FACTOR takes at most 1 / (1 + BATCH_FACTOR) of the operator's time, a
#: longer one at most run / (run + BATCH_MAX): a 4,096-proc mesh that is starting (reconciles
#: of 0.1 to 0.3 s, events all along) leaves the CPU to the API server, the scheduler and the
#: kubelets it waits for.
BATCH_FACTOR = 3.0
#: How long :meth:`WorkQueue.close` lets reconciles in flight finish (the chart's pod has 30 s
#: between SIGTERM and SIGKILL).
DRAIN_SECONDS = 10.0


@dataclasses.dataclass
class _Slot:
    dirty: bool = False
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    failures: int = 0
    forgotten: bool = False  # discarded while its reconcile ran: dropped when that ends
    running: bool = False  # in the worker (past the gate): close() lets it finish
    not_before: float = 0.0  # loop time before which it does not run again (batch_wait)


def batch_wait(run_seconds: float) -> float:
    """How long a key's events batch after a run of ``run_seconds`` that they came during."""
    return min(BATCH_FACTOR * run_seconds, BATCH_MAX)


class WorkQueue:
    """Runs ``worker(key)`` whenever ``key`` is enqueued, never twice at once for one key.

    ``worker`` returns None or a delay in seconds after which to run again. ``gate``, when
    given, is awaited before every run (the operator's leader election: a follower's keys
    wait, dirty, until it leads)."""

    def __init__(self, worker: Callable[[Hashable], Awaitable[float | None]],
                 gate: Callable[[], Awaitable[None]] | None = None,
                 expected: tuple[type[Exception], ...] = ()) -> None:
        self._worker = worker
        self._gate = gate
        # Failures the worker reports itself (in the mesh's status): one log line each, not a
        # traceback every retry of a refusal that stands for hours.
        self._expected = expected
        self._slots: dict[Hashable, _Slot] = {}
        self._closed = False

    def enqueue(self, key: Hashable, delay: float = 0.0) -> None:
        if self._closed:
            return
        slot = self._slots.setdefault(key, _Slot())
        slot.forgotten = False
        if delay > 0:
            if slot.timer is not None:
                slot.timer.cancel()
            slot.timer = asyncio.get_running_loop().call_later(delay, self.enqueue, key)
            return
        slot.dirty = True
        if slot.task is None:
            slot.task = asyncio.get_running_loop().create_task(self._run(key, slot))

    def keys(self) -> list[Hashable]:
        """The keys the queue holds state for (a test checks a deleted mesh leaves none)."""
        return list(self._slots)

    def discard(self, key: Hashable) -> None:
        """Forget a key (its object is gone): its timer stops, and its slot goes (at once, or
        when a running reconcile finishes), so nothing is kept per deleted object."""
        slot = self._slots.get(key)
        if slot is None:
            return
        if slot.timer is not None:
            slot.timer.cancel()
            slot.timer = None
        if slot.task is None:
            del self._slots[key]
        else:
            # A run waiting for its turn (or at the gate) does not start; one under way ends.
            slot.forgotten, slot.dirty = True, False

    async def _run(self, key: Hashable, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        try:
            while slot.dirty and not self._closed:
                # Events batch after a run for batch_wait() of it: a mesh whose reconcile costs
                # more (thousands of procs) is looked at less often instead of back to back; a
                # small one at once. (Its events reach the queue after a run, not during it,
                # when the run's work does not await: so this waits here, not after the run.)
                rest = slot.not_before - loop.time()
                if rest > 0:
                    await asyncio.sleep(rest)
                    if self._closed or slot.forgotten:
                        break
                slot.dirty = False
                if self._gate is not None:
                    await self._gate()
                    if self._closed or slot.forgotten:
                        break
                started = loop.time()
                slot.running = True
                try:
                    delay = await self._worker(key)
                    slot.failures = 0
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    slot.failures += 1
                    delay = min(BACKOFF_BASE * 2 ** (slot.failures - 1), BACKOFF_MAX)
                    if isinstance(e, self._expected):
                        logger.warning("reconcile of %s failed; retrying in %.1fs: %s", key, delay, e)
                    else:
                        logger.exception("reconcile of %s failed; retrying in %.1fs", key, delay)
                slot.running = False
                ended = loop.time()
                slot.not_before = ended + batch_wait(ended - started)
                if delay is not None and not slot.dirty:
                    self.enqueue(key, delay)
        finally:
            slot.running = False
            slot.task = None
            if slot.forgotten and not slot.dirty and self._slots.get(key) is slot:
                del self._slots[key]

    async def close(self, drain: float = DRAIN_SECONDS) -> None:
        """Stop: no new runs, pending retries dropped; a reconcile in flight may finish for up
        to ``drain`` seconds, then is cancelled. A reconcile cut short leaves a mesh half
        made for the next operator (safe, but an orphan token Secret if cut before its name
        was recorded: token_secrets.py), so a stopping replica (a failover, an upgrade) lets
        it end first."""
        self._closed = True
        tasks, running = [], []
        for slot in self._slots.values():
            if slot.timer is not None:
                slot.timer.cancel()
            if slot.task is not None:
                tasks.append(slot.task)
                if slot.running:  # not those waiting at the gate: they never started
                    running.append(slot.task)
        if running and drain > 0:
            await asyncio.wait(running, timeout=drain)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
