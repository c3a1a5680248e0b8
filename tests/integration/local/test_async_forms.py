"""The async forms of the local backend's blocking calls leave the event loop free.

Aspects: ``spawn_procs_async`` and ``respawn_async`` are awaited while another task of the same
loop keeps running (it gets turns while they are pending, which a blocking call would not give
it); their results are the same as the blocking forms'.
"""

import asyncio
import os
import signal

from mesh_client import this_host
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
