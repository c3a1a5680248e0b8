"""A dead proc fails a mesh-wide call at once, whatever the survivors are doing.

Aspects: ``call()`` raises SupervisionError naming the dead proc while the survivors are still
inside a long endpoint (how it died only if the launcher knew within
``peers.LOSS_DETAIL_SECONDS``: the error does not wait for it); once the launcher knows, a later
``call()`` fails at once saying how it died; ``stream()`` yields the dead proc's failure and every
survivor's result.
"""

import os
import signal

import pytest

from mesh_client import SupervisionError, this_host
from tests.integration.local.actors import Recorder

# Survivors sleep far longer than any get() below waits, so an answer means nobody waited for them.
SURVIVOR_SLEEP = 600.0
WAIT = 10.0


def test_call_fails_fast_when_one_proc_dies_while_the_others_are_busy():
    with this_host().spawn_procs(per_host={"gpus": 4}, name="ff") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pids = rec.where.call().get(timeout=WAIT)
        victim = pids.item(gpus=2)["pid"]
        pending = rec.sleep.call(SURVIVOR_SLEEP)
        # The survivors' sleep has started before the kill (their actor threads run in order).
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(SupervisionError) as info:
            pending.get(timeout=WAIT)
        first = str(info.value)
        assert "ff[gpus=2]" in first and f"pid {victim}" in first
        assert "killed by SIGKILL" in first or "exit status was not known yet" in first
        mesh._group.owner.processes[2].wait(timeout=WAIT)  # the launcher learns how it died
        with pytest.raises(SupervisionError, match=r"ff\[gpus=2\] .*killed by SIGKILL"):
            rec.echo.call(1).get(timeout=WAIT)
        for _point, proc in pids.items():
            if proc["pid"] != victim:
                os.kill(proc["pid"], signal.SIGKILL)  # do not wait 600 s for the sleepers to stop


def test_stream_yields_the_dead_procs_failure_and_every_survivor():
    with this_host().spawn_procs(per_host={"gpus": 3}, name="fs") as mesh:
        rec = mesh.spawn("rec", Recorder)
        victim = rec.slice(gpus=1).where.call_one().get(timeout=WAIT)["pid"]
        # Survivors answer after a short sleep; the victim is killed while it sleeps too.
        futs = rec.sleep.stream(2.0)
        os.kill(victim, signal.SIGKILL)
        outcomes = []
        for fut in futs:
            try:
                outcomes.append(fut.get(timeout=WAIT))
            except SupervisionError as exc:
                assert "fs[gpus=1]" in str(exc)
                outcomes.append("dead")
        # The order depends on scheduling (the death is seen in milliseconds, the sleeps take 2 s).
        assert sorted(outcomes, key=str) == [2.0, 2.0, "dead"]
