"""One future for the replies of many requests: a counter, not a chain of per-request futures.

A mesh-wide ``call()`` to N procs used to make N futures, each with two locks, and N done
callbacks that ran on the I/O thread as the replies came. A :class:`Gather` is one object: the
peer (:mod:`.peers`) hands each reply's raw outcome to a :class:`Slot` of it, which stores it
and counts down; the gather's single :class:`~.futures.Future` completes when the last reply
is in, or at once when a slot's outcome is a failure the caller must not wait past (a dead
proc, a failed actor: the others may wait for the failed one forever). Nothing is unpickled on
the I/O thread: the replies are decoded in the thread that asks for the result.

Used by :mod:`mesh_client._src.actor.actor_mesh` for ``call()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from mesh_client._src.runtime import futures

B = TypeVar("B")

_PENDING: Any = object()


class Gather(Generic[B]):
    """``size`` raw outcomes; ``future`` gives ``build([decode(i, raw_i) for each i])``.

    ``fail_fast(raw)`` true for an outcome completes the whole at once; its ``decode`` then
    raises that member's error; ``key``: the future's (:class:`~.futures.Future`). Slots may be filled from any thread (replies come on the I/O
    thread, a lost connection's failures on whichever thread saw it drop).
    """

    __slots__ = ("_raws", "_remaining", "_failed", "_lock", "_decode", "_build", "_fail_fast", "future")

    def __init__(
        self,
        size: int,
        decode: Callable[[int, Any], Any],
        build: Callable[[list[Any]], B],
        fail_fast: Callable[[Any], bool],
        key: Hashable | None = None,
    ) -> None:
        self._raws: list[Any] = [_PENDING] * size
        self._remaining = size
        self._failed = -1  # the index of the first fail-fast outcome, once one arrived
        self._lock = threading.Lock()
        self._decode = decode
        self._build = build
        self._fail_fast = fail_fast
        self.future: futures.Future[B] = futures.Future(self._result, key)
        if size == 0:
            self.future.set_raw(None)

    def __repr__(self) -> str:
        return f"<Gather {len(self._raws) - self._remaining}/{len(self._raws)} in>"

    def slot(self, index: int) -> Slot:
        """Where the outcome of member ``index`` goes (what a peer keeps for its reply)."""
        return Slot(self, index)

    def arrive(self, index: int, raw: Any) -> bool:
        """Member ``index`` completed with ``raw``; False if it already had."""
        failing = self._fail_fast(raw)
        with self._lock:
            if self._raws[index] is not _PENDING:
                return False
            self._raws[index] = raw
            self._remaining -= 1
            done = self._remaining == 0
            if failing and self._failed < 0:
                self._failed = index
                done = True
        if done:
            self.future.set_raw(None)  # a no-op if a failure completed it already
        return True

    def _result(self, _: object) -> B:
        if self._failed >= 0:
            self._decode(self._failed, self._raws[self._failed])  # raises the member's error
            raise RuntimeError(f"member {self._failed} of a gather failed fast, but decoding its outcome raised nothing")
        return self._build([self._decode(i, raw) for i, raw in enumerate(self._raws)])


class Slot:
    """One member of a :class:`Gather`, as a peer sees it: something to ``set_raw``."""

    __slots__ = ("_gather", "_index")

    def __init__(self, gather: Gather[Any], index: int) -> None:
        self._gather = gather
        self._index = index

    def set_raw(self, raw: Any) -> bool:
        return self._gather.arrive(self._index, raw)

    def peek_raw(self) -> Any:
        raw = self._gather._raws[self._index]
        return None if raw is _PENDING else raw
