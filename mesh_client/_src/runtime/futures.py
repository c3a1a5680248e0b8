"""A future that threads block on with ``get()`` and coroutines ``await``.

Results arrive raw (as the reactor saw them) and are decoded on first use in the thread that
asks, so the I/O thread never unpickles user payloads. A thread about to wait for one first
writes the frames this process holds back (:mod:`.coalescing`): its own request may be among them,
then waits on its own bell (:mod:`.waits`: a short spin, then sleep), which the producer rings.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Generator, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mesh_client._src.runtime import ahead, coalescing, waits
from mesh_client._src.runtime import reactor as reactor_mod

if TYPE_CHECKING:
    import asyncio

R = TypeVar("R")

_UNSET: Any = object()
_LONGEST = 1e9  # seconds: a longer timeout (math.inf) waits as long as this


def check_timeout(timeout: float) -> None:
    """Refuse a timeout no wait can honour (negative, NaN), as Monarch's ``get()``. Unlike
    Monarch's, ``math.inf`` is taken, as no limit: a program that passes it means that."""
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"invalid timeout {timeout}: give a non-negative number of seconds, "
                         "or None to wait without a limit")


class Future(Generic[R]):
    """The eventual result of a call: ``fut.get(timeout=None)``, ``await fut``, or
    ``fut.as_asyncio()`` (an ``asyncio.Future`` for ``asyncio.gather``, ``wait_for``...).

    ``key``: what the future's result comes from (an endpoint of an actor mesh), by which a wait
    for it expects as long as the last waits for the same (:mod:`.ahead`); None: as this
    thread's last waits for futures without one."""

    __slots__ = ("_waiters", "_lock", "_done", "_raw", "_decode", "_value", "_error", "_callbacks", "_key")

    def __init__(self, decode: Callable[[Any], R] | None = _UNSET, key: Hashable | None = None) -> None:
        if decode is _UNSET:  # as Monarch's: nothing would ever complete a Future made by hand
            raise TypeError("Future objects are returned by mesh_client operations and cannot be constructed directly; "
                            "for a future of your own, use @returns_future or asyncio.Future")
        # The bells of the threads waiting (most futures of pipelined calls are done before
        # anyone asks: they never have one); rung when done.
        self._waiters: list[waits.Bell] | None = None
        self._lock = threading.Lock()
        self._done = False
        self._raw: Any = None
        self._decode = decode
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[R]], None]] | None = None
        self._key = key

    def __repr__(self) -> str:
        return f"<Future {'done' if self._done else 'pending'}>"

    # Producer side -------------------------------------------------------------------------

    def set_raw(self, raw: Any) -> bool:
        """Complete with a raw outcome, to be decoded later; False if already complete."""
        with self._lock:
            if self._done:
                return False
            self._raw = raw
            self._done = True
            callbacks, self._callbacks = self._callbacks, None
            waiters = self._waiters
        if waiters is not None:
            for bell in waiters:
                _ring(bell)
        if callbacks:
            waits.flush()  # a callback may block on a thread that waits for its ring
            for cb in callbacks:
                try:
                    cb(self)
                except Exception:  # noqa: BLE001 - reported; the producer completes others after this one
                    _report_callback(self, cb)
        return True

    def set_result(self, value: R) -> bool:
        self._decode = None
        self._value = value
        return self.set_raw(None)

    def set_exception(self, error: BaseException) -> bool:
        self._decode = None
        self._error = error
        return self.set_raw(None)

    def add_done_callback(self, fn: Callable[[Future[R]], None]) -> None:
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        fn(self)

    def _remove_done_callback(self, fn: Callable[[Future[R]], None]) -> None:
        """Drop ``fn`` if it has not run: an await given up on (a timeout, a cancel) leaves
        nothing behind on a future that may never complete."""
        with self._lock:
            if self._callbacks is not None and fn in self._callbacks:
                self._callbacks.remove(fn)

    # Consumer side -------------------------------------------------------------------------

    def done(self) -> bool:
        return self._done

    def peek_raw(self) -> Any:
        """The raw outcome as the producer set it, without decoding; None while pending, after
        decoding, or for ``set_result``/``set_exception``. Lets a done callback classify a
        result (e.g. a lost connection) on the I/O thread without unpickling anything."""
        return self._raw if self._done else None

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        if timeout is not None:
            check_timeout(timeout)
        if reactor_mod.on_reactor_thread():
            # A done callback runs here: waiting would hold every reply of the process, its own too.
            raise RuntimeError(
                "a call's result cannot be waited for on procmesh's I/O thread (in a done "
                "callback): it delivers every reply of this process, this one too. Chain it with "
                "add_done_callback, or wait on another thread")
        _warn_in_loop()
        coalescing.waiting()
        bell = waits.enter_own_wait()
        try:
            self._wait_on(bell, timeout)
        finally:
            waits.leave_own_wait(bell)

    def _wait_on(self, bell: waits.Bell, timeout: float | None) -> None:
        with self._lock:
            if self._done:
                return
            if self._waiters is None:
                self._waiters = [bell]
            elif bell not in self._waiters:  # a thread polling with timeouts comes back
                self._waiters.append(bell)
        # The bell is this thread's: a ring left from an earlier future wakes it early, so loop.
        try:  # from here: a Ctrl-C anywhere takes the bell back off the future
            started, key = time.monotonic_ns(), self._key
            wake_at = ahead.due(started, key)  # when to wake ahead of the reply (0: not)
            deadline = None if timeout is None else started + int(min(max(timeout, 0), _LONGEST) * 1e9)
            spin, paced = waits.SPIN_NS, True
            spin_until = 0  # once woken ahead: until when its waits spin (a ring ends one early)
            while not self._done:
                if spin_until:
                    spin = max(spin_until - time.monotonic_ns(), 0)
                if wake_at and (deadline is None or wake_at < deadline):
                    left = wake_at - time.monotonic_ns()
                    if (left > 0 and bell.wait(left / 1e9, spin, paced)) or self._done:
                        continue  # rung (perhaps by an earlier future): look again
                    wake_at = 0  # the reply is due: spin for it, with the I/O thread that reads it
                    spin, paced = ahead.wake_io(), False
                    spin_until = time.monotonic_ns() + spin
                elif deadline is None:
                    bell.wait(None, spin, paced)
                else:
                    left = deadline - time.monotonic_ns()
                    if left <= 0 or (not bell.wait(left / 1e9, spin, paced) and not self._done):
                        raise TimeoutError(f"no result within {timeout} s")
            ahead.waited(started, key)
        except BaseException:  # a timeout, a Ctrl-C: this thread waits here no more
            self._forget(bell)
            raise

    def _forget(self, bell: waits.Bell) -> None:
        """Drop a bell that stopped waiting: a future polled with timeouts by many short-lived
        threads would otherwise keep every one of their bells until it completes."""
        with self._lock:
            if not self._done and self._waiters is not None and bell in self._waiters:
                self._waiters.remove(bell)

    def _outcome(self) -> R:
        if self._error is None:
            value: R = self._value
            if value is not _UNSET:  # decoded already: the common case of a second look
                return value
            with self._lock:
                if self._value is _UNSET and self._error is None:
                    try:
                        self._value = self._decode(self._raw) if self._decode else self._raw
                    except Exception as exc:
                        self._error = exc
                    # A Ctrl-C while decoding is not the call's outcome: it propagates, the raw
                    # result stays, and the next look decodes it again.
                    self._raw = None
        if self._error is not None:
            raise self._error
        decoded: R = self._value  # decoded by now (an Any only because of the _UNSET sentinel)
        return decoded

    def get(self, timeout: float | None = None) -> R:
        """Block until the result is there and return it (or raise the call's error)."""
        if timeout is not None:  # done or not: whether the reply beat this get() is a race,
            check_timeout(timeout)  # the answer to a bad argument is not
        if not self._done:  # a pipelined call's future is mostly done before it is asked
            self._wait(timeout)
        return self._outcome()

    def result(self, timeout: float | None = None) -> R:
        return self.get(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        try:
            self._outcome()
        except BaseException as exc:
            if exc is self._error:  # the call's outcome; a Ctrl-C while decoding is not
                return exc
            raise
        return None

    def as_asyncio(self) -> asyncio.Future[R]:
        """A new ``asyncio.Future`` of the running loop that completes as this one does (as in
        Monarch; each call gives its own, all of the same outcome). Off a loop it raises
        RuntimeError, Monarch's, leaving this future as it was."""
        import asyncio  # loaded only by programs that use it (it costs ~35 ms at start-up)

        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:  # raised here, not in the except: no "no running event loop" context
            raise RuntimeError("as_asyncio() requires a running asyncio event loop.")
        mirror: asyncio.Future[R] = loop.create_future()

        def settle() -> None:  # on the loop's thread: results are decoded there, not on the I/O thread
            if mirror.done():  # cancelled by its awaiter
                return
            try:
                value = self._outcome()
            except StopIteration:  # asyncio futures refuse it (PEP 479); Monarch's words
                mirror.set_exception(RuntimeError("coroutine raised StopIteration"))
            except BaseException as exc:  # noqa: BLE001 - it is the awaiter's to raise
                mirror.set_exception(exc)
            else:
                mirror.set_result(value)

        if self._done:
            settle()
            return mirror
        coalescing.waiting()  # a request this future waits for may be among the frames held back

        def wake(_: Future[R]) -> None:
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop was closed: nobody awaits the mirror now
                pass

        self.add_done_callback(wake)
        mirror.add_done_callback(lambda m: self._remove_done_callback(wake) if m.cancelled() else None)
        return mirror

    def __await__(self) -> Generator[Any, None, R]:
        if not self._done:
            import asyncio  # loaded only by programs that await (it costs ~35 ms at start-up)

            coalescing.waiting()

            loop = asyncio.get_running_loop()
            waiter = loop.create_future()

            def resolve() -> None:
                if not waiter.done():
                    waiter.set_result(None)

            def wake(_: Future[R]) -> None:
                try:
                    loop.call_soon_threadsafe(resolve)
                except RuntimeError:  # the loop was closed (asyncio.run returned): nobody awaits this now
                    pass

            started, key = time.monotonic_ns(), self._key
            wake_at = ahead.due(started, key)
            timer: reactor_mod.Timer | None = None
            self.add_done_callback(wake)
            try:  # from here: a Ctrl-C anywhere takes the callback back off the future
                if wake_at:
                    timer = ahead.wake_io_at(wake_at)
                yield from waiter.__await__()
            finally:
                self._remove_done_callback(wake)  # cancelled: no callback left per attempt
                if timer is not None:
                    timer.cancel()
            ahead.waited(started, key)
        return self._outcome()


_ring = waits.ring


def _warn_in_loop() -> None:
    """Warn, as Monarch does, when a blocking wait starts inside a running asyncio loop: it
    stalls every task of that loop until the result comes."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and asyncio.events._get_running_loop() is not None:
        frame: types.FrameType | None = sys._getframe(1)
        level = 2  # warnings' count: 1 is this function, 2 its caller
        while frame is not None and frame.f_globals.get("__name__") in _FUTURE_MODULES:
            frame, level = frame.f_back, level + 1  # get() through result(), a BodyFuture's get()
        if frame is not None and str(frame.f_globals.get("__name__")).startswith("mesh_client."):
            return  # our own wait inside a sync API (a stop): the API is what the user called
        warnings.warn(
            "Future.get() was called from within a running asyncio event loop: it blocks the loop "
            "until the result comes; use `await future` there instead", stacklevel=level)


# The futures a user waits on: their own frames are not the caller of get().
_FUTURE_MODULES = frozenset({__name__, "mesh_client._src.runtime.deferring", "mesh_client._src.actor.own_calls"})


def _report_callback(fut: Future[Any], cb: Callable[..., object]) -> None:
    """A done callback raised. It is not raised to the producer: that is often the I/O thread
    completing many futures in a row (a batch of replies, every call pending on a lost proc),
    and the futures after this one would never complete."""
    import traceback

    print(f"procmesh: a done callback of {fut!r} failed: {cb!r}", file=sys.stderr)
    traceback.print_exc()


def completed(value: R) -> Future[R]:
    """A future that is already done with ``value``."""
    fut: Future[R] = Future(None)
    fut.set_result(value)
    return fut


def failed(exc: BaseException) -> Future[Any]:
    """A future that is already done, raising ``exc`` (Monarch raises in the future, not the call)."""
    fut: Future[Any] = Future(None)
    fut.set_exception(exc)
    return fut
