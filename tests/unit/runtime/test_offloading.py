"""run_blocking's cancellation: the awaiting task is cancelled, the thread is told so and given
its grace to clean up, and the event loop's other tasks keep running meanwhile (a join on the
loop's thread would freeze them for the whole grace); at the program's exit the thread is told
the same and waited for, never left inside an API call while the interpreter finalizes."""

import asyncio
import threading

import pytest

from mesh_client._src.runtime import exiting, offloading


def test_a_cancelled_call_lets_other_tasks_run_while_its_thread_finishes():
    release = threading.Event()
    cleaned = threading.Event()

    def stubborn() -> None:  # blocks in a call that cannot see the cancellation
        release.wait(30)
        cleaned.set()

    async def main() -> list[str]:
        seen: list[str] = []
        call = asyncio.ensure_future(offloading.run_blocking(stubborn, name="stubborn"))
        await asyncio.sleep(0.05)
        call.cancel()

        async def other() -> None:
            await asyncio.sleep(0)
            seen.append("other task ran")
            release.set()  # only a running loop gets here: then the thread may finish

        helper = asyncio.ensure_future(other())
        with pytest.raises(asyncio.CancelledError):
            await call
        await helper
        seen.append("cancelled" if cleaned.is_set() else "cancelled before cleanup")
        return seen

    assert asyncio.run(main()) == ["other task ran", "cancelled"]


def test_the_exit_cancels_a_running_call_and_waits_for_its_thread():
    started = threading.Event()
    outcome: list[str] = []

    def polling() -> None:  # attach's wait for Ready: polls, sleeping with offloading.sleep
        started.set()
        try:
            for _ in range(600):
                offloading.sleep(0.05)
            outcome.append("ran to the end")
        except asyncio.CancelledError:
            outcome.append("cancelled")

    async def main() -> tuple[threading.Thread, asyncio.Future[None]]:
        call = asyncio.ensure_future(offloading.run_blocking(polling, name="polling-at-exit", at_exit=True))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        return next(t for t in threading.enumerate() if t.name == "polling-at-exit"), call

    # The program ends with the call still running and nobody awaiting it: its loop is closed,
    # no task is cancelled (what asyncio.run would do; a program may end otherwise).
    loop = asyncio.new_event_loop()
    thread, call = loop.run_until_complete(main())
    loop.close()
    assert thread.is_alive() and not call.done()
    halt = exiting.EXITS.halt_of(thread)
    assert halt is not None, "the thread of an async call is not ended at exit"
    exits = exiting.Exits()  # the exit's own steps, on this thread alone (not the process's registry)
    exits.track(thread, halt)
    assert exits.end_all(wait=30) == []
    assert outcome == ["cancelled"]
    call._log_destroy_pending = False  # type: ignore[attr-defined]  # abandoned on purpose


def test_a_call_that_makes_no_api_calls_is_not_waited_for_at_exit(monkeypatch):
    """Only calls that may be in TLS at exit (at_exit=True: attach, the Kubernetes spawn,
    reconnect, respawn) are ended and joined then; a local spawn is not held up for."""
    release = threading.Event()

    async def main() -> None:
        await offloading.run_blocking(lambda: release.wait(30), name="local-at-exit")

    threading.Timer(0.2, release.set).start()
    seen: list[threading.Thread] = []
    original = threading.Thread.start

    def spy(thread: threading.Thread) -> None:
        if thread.name == "local-at-exit":
            seen.append(thread)
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", spy)
    asyncio.run(main())
    monkeypatch.undo()
    assert seen and exiting.EXITS.halt_of(seen[0]) is None
