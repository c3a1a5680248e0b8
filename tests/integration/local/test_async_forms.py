"""The async forms of the local backend's blocking calls leave the event loop free.

Aspects: ``spawn_procs_async`` and ``respawn_async`` are awaited while another task of the same
loop keeps running (it gets turns while they are pending, which a blocking call would not give
it); their results are the same as the blocking forms'; a call left pending by an event loop that
has closed holds up no other call completed after it.
"""

import asyncio
import os
import signal

import pytest

from mesh_client import SupervisionError, this_host
from tests.integration.local.actors import Recorder


async def with_turns(awaitable):
    """(result, turns another task got while ``awaitable`` was pending)."""
    task = asyncio.ensure_future(awaitable)
    turns = 0
    await asyncio.sleep(0)  # the task has started; it is pending unless it blocked the loop
    while not task.done():
        turns += 1
        await asyncio.sleep(0.01)
    return await task, turns


def test_spawn_procs_and_respawn_async_let_other_tasks_run(faults):
    async def main():
        mesh, turns = await with_turns(this_host().spawn_procs_async(per_host={"gpus": 2}, name="asy"))
        assert turns >= 1 and mesh.sizes == {"gpus": 2}
        rec = mesh.spawn("rec", Recorder)
        os.kill((await rec.slice(gpus=1).where.call_one())["pid"], signal.SIGKILL)
        faults.wait("rec")
        restarted, turns = await with_turns(mesh.respawn_async())
        assert restarted == [1] and turns >= 1
        assert list((await rec.echo.call(7)).values()) == [7, 7]
        await mesh.stop()

    asyncio.run(main())


def test_a_call_abandoned_by_a_closed_event_loop_holds_up_no_other(faults, tmp_path, capfd):
    """``asyncio.run`` returned while an awaited call was still pending (a ``wait_for`` that
    timed out): when that call completes, its loop is gone; the other calls completed with it
    (here: every call pending on a proc that dies) still complete, and nothing is printed."""
    never = str(tmp_path / "never")
    with this_host().spawn_procs(per_host={"gpus": 1}, name="closed") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pid = rec.where.call_one().get(timeout=60)["pid"]
        others = [rec.wait_for.call_one(never) for _ in range(3)]

        async def abandon():
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(rec.wait_for.call_one(never), 0.01)  # it cannot complete

        asyncio.run(abandon())
        os.kill(pid, signal.SIGKILL)
        for fut in others:
            with pytest.raises(SupervisionError, match=r"closed\[gpus=0\]"):
                fut.get(timeout=60)
        faults.wait("rec")
    assert "Event loop is closed" not in capfd.readouterr().err
