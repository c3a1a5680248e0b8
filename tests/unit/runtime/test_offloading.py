"""run_blocking's cancellation: the awaiting task is cancelled, the thread is told so and given
its grace to clean up, and the event loop's other tasks keep running meanwhile (a join on the
loop's thread would freeze them for the whole grace)."""

import asyncio
import threading

import pytest

from mesh_client._src.runtime import offloading


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
