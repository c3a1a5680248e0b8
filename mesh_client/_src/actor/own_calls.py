"""An actor waiting for its own call: refused at the wait, instead of waiting for ever.

An actor handles one message at a time, on its own thread (and its ``async def`` endpoints on
its own asyncio loop). An endpoint that calls its own actor and then blocks in ``get()`` on that
thread waits for a message queued behind the one that waits: it never runs (a timeout, if any,
is all that ends it, and the caller of the outer call waits as long). Monarch deadlocks there
too; here the ``get()`` raises at once, saying why and what to do instead.

The proc server registers an actor's message threads (:func:`.context.runs_messages`) only when
the refusal is exact: not for an actor mixing ``def`` and ``async def`` endpoints, whose thread
may serve its own call while a concurrent endpoint waits for it on the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, TypeVar

from mesh_client._src.runtime.futures import Future

R = TypeVar("R")


def guard(futs: list[Future[Any]], here: tuple[str, int], actor_id: str, procs: Sequence[int],
          what: str) -> list[Future[Any]]:
    """``futs`` (one per proc of ``procs``, calls to actor ``actor_id``), with the one to the
    actor that runs on this thread (``here``: :func:`.context.messages_run_here`), if any,
    replaced by a future whose wait here raises."""
    if here[0] != actor_id or here[1] not in procs:
        return futs
    k = list(procs).index(here[1])
    return [*futs[:k], OwnCall(futs[k], what), *futs[k + 1:]]


def guard_one(fut: Future[R], here: tuple[str, int], actor_id: str, procs: Sequence[int], what: str) -> Future[R]:
    """``fut``, the outcome of a call to actor ``actor_id`` on all of ``procs``, guarded as
    :func:`guard` does when the actor running on this thread is among them."""
    return OwnCall(fut, what) if here[0] == actor_id and here[1] in procs else fut


class OwnCall(Future[R]):
    """The outcome of ``inner``; waiting for it on the thread that made the call raises
    RuntimeError while it is pending (it is queued behind the waiting message)."""

    __slots__ = ("_inner", "_thread", "_what")

    def __init__(self, inner: Future[R], what: str) -> None:
        super().__init__(self._inner_outcome)
        self._inner = inner
        self._thread = threading.get_ident()
        self._what = what
        inner.add_done_callback(self._arrived)

    def _arrived(self, _: Future[R]) -> None:
        self.set_raw(None)

    def _inner_outcome(self, _: object) -> R:
        return self._inner.get()

    def _wait(self, timeout: float | None) -> None:
        if not self._done and threading.get_ident() == self._thread:
            raise RuntimeError(
                f"{self._what} would wait for ever: it calls the actor that is waiting for it, and an "
                f"actor handles one message at a time, so the call runs only after this message returns. "
                f"Call the method directly (self.method(...)), or return without waiting for the call"
            )
        super()._wait(timeout)
