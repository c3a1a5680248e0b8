"""Monarch's @returns_future: an async def that returns a Future, run where first observed.

Aspects: calling runs none of the body; ``.get()`` runs it (also from inside a running loop, on a
helper thread); ``await`` and ``as_asyncio()`` run it as a task of the running loop; the body runs once whoever
observes, and sees the caller's context variables as they were at the call; a timeout cancels
the body and raises TimeoutError; the body's exception reaches every observer; a sync function
is refused.
"""

import asyncio
import contextvars
import threading

import pytest

from mesh_client import Future, returns_future

runs: list[str] = []
var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


@returns_future
async def body(tag: str) -> str:
    runs.append(tag)
    await asyncio.sleep(0)
    return f"{tag}:{var.get()}"


@pytest.fixture(autouse=True)
def clear():
    runs.clear()


def test_calling_runs_nothing_and_get_runs_the_body_once():
    fut = body("a")
    assert isinstance(fut, Future) and runs == []
    assert fut.get() == "a:unset" and fut.get() == "a:unset" and runs == ["a"]


def test_the_body_sees_the_callers_context_at_the_call():
    token = var.set("at call")
    fut = body("c")
    var.reset(token)
    assert fut.get() == "c:at call"


def test_await_runs_it_on_the_awaiting_loop():
    @returns_future
    async def which_loop():
        return asyncio.get_running_loop()

    async def main():
        fut = which_loop()
        return await fut, asyncio.get_running_loop(), await fut

    first, loop, again = asyncio.run(main())
    assert first is loop and again is loop


def test_as_asyncio_runs_it_on_the_running_loop():
    """It waited for a body nobody started (a review found it never completed)."""
    async def main():
        fut = body("d")
        return await asyncio.wait_for(fut.as_asyncio(), 30), await asyncio.wait_for(fut.as_asyncio(), 30)

    assert asyncio.run(main()) == ("d:unset", "d:unset") and runs == ["d"]


def test_get_inside_a_running_loop_runs_on_a_helper_thread():
    @returns_future
    async def where():
        return threading.current_thread().name

    async def main():
        return where().get()

    assert asyncio.run(main()) == "returns_future"


def test_a_timeout_cancels_the_body():
    cancelled = threading.Event()

    @returns_future
    async def forever():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    fut = forever()
    with pytest.raises(TimeoutError, match="did not finish in time"):
        fut.get(timeout=0.01)
    assert cancelled.is_set()
    with pytest.raises(TimeoutError):
        fut.get()  # the outcome stands


def test_the_bodys_error_reaches_every_observer():
    @returns_future
    async def fails():
        raise ValueError("no")

    fut = fails()
    with pytest.raises(ValueError, match="no"):
        fut.get()
    assert isinstance(fut.exception(), ValueError)


def test_a_sync_function_is_refused():
    with pytest.raises(TypeError, match="requires an async function"):
        returns_future(lambda: 1)


def test_a_bad_timeout_runs_nothing_and_leaves_the_body_to_a_later_get():
    @returns_future
    async def once():
        runs.append("once")
        return 1

    fut = once()
    with pytest.raises(ValueError, match="invalid timeout -0.5"):
        fut.get(timeout=-0.5)
    assert runs == [] and fut.get(timeout=30) == 1 and runs == ["once"]
