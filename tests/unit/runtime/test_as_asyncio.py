"""``Future.as_asyncio()``: Monarch's way to hand a result to asyncio (``gather``, ``wait_for``).

Aspects: the asyncio future completes when a thread completes ours, with its value or its
exception; a future already done gives a done one; each call gives a new asyncio future of
the same outcome, and ``get()`` still works after; a StopIteration becomes Monarch's
RuntimeError (asyncio futures refuse it); off a running loop it raises Monarch's RuntimeError
and the future is left as it was.
"""

import asyncio
import threading

import pytest

from mesh_client import Future


def complete_later(fut, value=None, error=None):
    """Complete ``fut`` from another thread, as the I/O thread completes a call's."""

    def run():
        if error is None:
            fut.set_result(value)
        else:
            fut.set_exception(error)

    threading.Thread(target=run).start()


def test_it_completes_with_the_value_a_thread_sets():
    async def main():
        fut = Future(None)
        mirror = fut.as_asyncio()
        assert isinstance(mirror, asyncio.Future) and not mirror.done()
        complete_later(fut, "value")
        return await asyncio.gather(mirror, fut.as_asyncio())

    assert asyncio.run(main()) == ["value", "value"]


def test_it_raises_the_exception_a_thread_sets():
    async def main():
        fut = Future(None)
        mirror = fut.as_asyncio()
        complete_later(fut, error=KeyError("k"))
        await mirror

    with pytest.raises(KeyError):
        asyncio.run(main())


def test_a_done_future_gives_a_done_one_each_time_and_get_still_works():
    async def main():
        fut = Future(None)
        fut.set_result(3)
        first, second = fut.as_asyncio(), fut.as_asyncio()
        assert first is not second and first.done() and second.done()
        return await first, await second, fut.get()

    assert asyncio.run(main()) == (3, 3, 3)


def test_a_stop_iteration_becomes_a_runtime_error():
    async def main():
        fut = Future(None)
        fut.set_exception(StopIteration())
        await fut.as_asyncio()

    with pytest.raises(RuntimeError, match="coroutine raised StopIteration"):
        asyncio.run(main())


def test_off_a_running_loop_it_raises_and_leaves_the_future_as_it_was():
    fut = Future(None)
    with pytest.raises(RuntimeError, match=r"^as_asyncio\(\) requires a running asyncio event loop\.$") as raised:
        fut.as_asyncio()
    assert raised.value.__context__ is None
    fut.set_result(1)
    assert fut.get() == 1
