"""The client's Future against misuse from async code and callbacks (runtime/futures.py).

Aspects: a Ctrl-C while a result decodes is not the call's outcome (the next look decodes it);
a wait on the I/O thread (a done callback) raises at once instead of holding every reply; a
negative timeout is refused, and a blocking wait inside a running asyncio loop warns, as
Monarch's ``get()`` does; an await given up on leaves no callback on the future.
"""

import asyncio
import threading

import pytest

from mesh_client._src.runtime import futures, reactor


def test_a_ctrl_c_while_decoding_is_not_kept_as_the_outcome():
    tries = []

    def decode(raw):
        tries.append(raw)
        if len(tries) == 1:
            raise KeyboardInterrupt
        return raw * 2

    fut = futures.Future(decode)
    fut.set_raw(21)
    with pytest.raises(KeyboardInterrupt):
        fut.get()
    assert fut.get() == 42 and fut.get() == 42 and tries == [21, 21]
    tries.clear()
    again = futures.Future(decode)
    again.set_raw(1)
    with pytest.raises(KeyboardInterrupt):  # not returned as the call's exception
        again.exception()
    assert again.exception() is None and again.get() == 2


def test_an_error_while_decoding_is_kept():
    fut = futures.Future(lambda raw: 1 / 0)
    fut.set_raw(1)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            fut.get()


def test_a_wait_on_the_io_thread_raises_instead_of_holding_every_reply():
    pending: futures.Future[int] = futures.Future(None)
    seen = []
    ran = threading.Event()

    def on_io_thread():
        try:
            pending.get(timeout=30)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            seen.append(exc)
        ran.set()

    reactor.get_reactor().call_soon(on_io_thread)
    assert ran.wait(10)
    assert isinstance(seen[0], RuntimeError) and "add_done_callback" in str(seen[0])
    done, ran = futures.completed(7), threading.Event()
    reactor.get_reactor().call_soon(lambda: (seen.append(done.get()), ran.set()))  # a done one is fine
    assert ran.wait(10) and seen[-1] == 7


@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan")])
def test_a_timeout_no_wait_can_honour_is_refused(timeout):
    with pytest.raises(ValueError, match="non-negative number of seconds"):
        futures.Future(None).get(timeout=timeout)


def test_a_bad_timeout_is_refused_on_a_done_future_too():
    """Whether the reply beat the get() is a race: the answer to a bad argument must not be."""
    done = futures.completed(7)
    with pytest.raises(ValueError, match="invalid timeout -1"):
        done.get(timeout=-1)
    assert done.get(timeout=0) == 7


def test_a_blocking_wait_inside_a_running_loop_warns():
    async def main():
        fut: futures.Future[int] = futures.Future(None)
        threading.Timer(0.05, fut.set_result, (5,)).start()
        with pytest.warns(UserWarning, match="within a running asyncio event loop") as warned:
            value = fut.result(timeout=30)  # through result(): still said at this line
        assert warned[0].filename == __file__
        return value

    assert asyncio.run(main()) == 5


def test_an_await_given_up_on_leaves_no_callback():
    fut: futures.Future[int] = futures.Future(None)

    async def main():
        for _ in range(100):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(fut, 0.001)

    asyncio.run(main())
    assert not fut._callbacks  # a future that never completes, polled: nothing kept per poll


def test_a_cancelled_mirror_leaves_no_callback():
    fut: futures.Future[int] = futures.Future(None)

    async def main():
        for _ in range(100):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(fut.as_asyncio(), 0.001)

    asyncio.run(main())
    assert not fut._callbacks


def test_a_future_is_not_made_by_hand_as_in_monarch():
    """Nothing would complete it: a get() without a timeout would wait for ever."""
    with pytest.raises(TypeError, match="cannot be constructed directly; for a future of your own, use @returns_future"):
        futures.Future()
