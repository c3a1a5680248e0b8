"""A priority gate: at most ``limit`` holders at once, waiters let in lowest priority first.

:mod:`.reconciling` sends every pod create through one :class:`PriorityGate`, with the mesh's
place in line (first come, first served, by mesh) as the priority. 100 meshes created at once
then have their pods created mesh after mesh, as a plain loop would, instead of interleaved: a
gang is placed only once all its pods exist, so interleaving kept every gang incomplete until
nearly every pod of the wave existed. It also bounds the creates in flight across meshes (one
mesh alone had 32, a hundred had 3,200, which waited past the client's timeouts).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator


class PriorityGate:
    """A semaphore whose waiters are served by (priority, arrival). Use inside one loop."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a gate needs a limit of at least 1, not {limit}")
        self._free = limit
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        """Wait for a place; lower ``priority`` values go first, equal ones in arrival order."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the place was handed over as the wait was cancelled
            raise

    def release(self) -> None:
        """Give a place back: to the first live waiter, else to the pool."""
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1

    @contextlib.asynccontextmanager
    async def place(self, priority: int) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, f in self._waiters if not f.done())
