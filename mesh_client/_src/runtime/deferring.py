"""Monarch's ``@returns_future``: an ``async def`` called like a function that returns a Future.

One implementation serves both kinds of caller, as Monarch's does: sync code calls ``.get()``,
async code ``await``\\ s. Calling the function only makes the coroutine (with a copy of the
caller's context variables); its body runs when the future is first observed, at most once:

- ``await`` or ``as_asyncio()``: as a task on the running loop (cancelling that ``await`` leaves
  the body running);
- ``.get()``: on a loop of its own in the calling thread, as ``asyncio.run`` does, or on a short
  helper thread when the caller is inside a running loop; a ``timeout`` that passes cancels the
  body and raises ``TimeoutError``.

Later observers, and done callbacks, share the first one's outcome; a done callback alone does
not start the body (it fires once an observer has). A future never observed closes its body
unstarted.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from mesh_client._src.runtime.futures import Future, check_timeout

if TYPE_CHECKING:
    import asyncio  # loaded when a body runs (it costs ~35 ms at start-up: futures.py)

P = ParamSpec("P")
R = TypeVar("R")

_running: set[asyncio.Task[Any]] = set()  # asyncio holds tasks weakly: ours until they finish


class BodyFuture(Future[R]):
    """A Future whose value is a coroutine's, run where it is first observed."""

    __slots__ = ("_body", "_context", "_take_lock")

    def __init__(self, body: Coroutine[Any, Any, R], context: contextvars.Context) -> None:
        super().__init__(None)
        self._body: Coroutine[Any, Any, R] | None = body
        self._context = context
        self._take_lock = threading.Lock()

    def _take(self) -> Coroutine[Any, Any, R] | None:
        with self._take_lock:
            body, self._body = self._body, None
        return body

    def __del__(self) -> None:
        body = getattr(self, "_body", None)
        if body is not None:
            body.close()  # never observed: none of its code runs, and no "never awaited" warning

    def get(self, timeout: float | None = None) -> R:
        if timeout is not None:  # before the body starts: a bad argument runs nothing
            check_timeout(timeout)
        body = self._take()
        if body is not None:
            self._drive(body, timeout)
        return super().get(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.get(timeout)
        except TimeoutError:
            if not self.done():
                raise
        except BaseException:  # noqa: BLE001 - the outcome, returned as Future.exception does
            pass
        return super().exception(0)

    def _drive(self, body: Coroutine[Any, Any, R], timeout: float | None) -> None:
        """Run the body to its end here, or on a helper thread if this thread runs a loop."""
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._run(body, timeout)
            return
        helper = threading.Thread(target=self._run, args=(body, timeout), name="returns_future", daemon=True)
        helper.start()
        helper.join()

    def _run(self, body: Coroutine[Any, Any, R], timeout: float | None) -> None:
        import asyncio

        async def bounded() -> R:
            return await asyncio.wait_for(body, timeout)

        try:
            value = self._context.run(asyncio.run, bounded())
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11
            self.set_exception(TimeoutError("returns_future operation did not finish in time"))
        except BaseException as exc:
            self.set_exception(exc)
            if not isinstance(exc, Exception):
                raise  # a Ctrl-C ends the caller too, once the body was cancelled
        else:
            self.set_result(value)

    def __await__(self) -> Generator[Any, None, R]:
        self._start_on_loop()
        return (yield from super().__await__())

    def as_asyncio(self) -> asyncio.Future[R]:
        mirror = super().as_asyncio()  # raises off a loop, leaving the body unstarted
        self._start_on_loop()
        return mirror

    def _start_on_loop(self) -> None:
        """Run the body, unless an earlier observer did, as a task of the running loop."""
        import asyncio

        body = self._take()
        if body is not None:
            task = self._context.run(asyncio.get_running_loop().create_task, body)
            _running.add(task)
            task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[R]) -> None:
        import asyncio

        _running.discard(task)
        if task.cancelled():
            self.set_exception(asyncio.CancelledError())
        elif task.exception() is not None:
            self.set_exception(task.exception())  # type: ignore[arg-type]  # not None, checked
        else:
            self.set_result(task.result())


def returns_future(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Future[R]]:
    """Make ``async def function`` return a :class:`Future` (``.get()`` or ``await``), as Monarch's
    ``returns_future``; the body runs when the future is first observed (module docstring)."""
    if not inspect.iscoroutinefunction(function):
        raise TypeError("returns_future requires an async function")

    @functools.wraps(function)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> Future[R]:
        return BodyFuture(function(*args, **kwargs), contextvars.copy_context())

    return wrapped
