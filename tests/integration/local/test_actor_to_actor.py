"""Actor mesh references travel to other procs, which call them directly."""

import os

from mesh_client import this_host
from tests.integration.local.actors import AsyncCaller, Caller, Recorder


def test_an_actor_calls_a_mesh_it_was_handed(procs):
    targets = procs.spawn("targets", Recorder)
    with this_host().spawn_procs(per_host={"gpus": 1}, name="callers") as other:
        caller = other.spawn("caller", Caller)
        out = caller.relay.call_one(targets, "hi").get()
        assert out["answers"] == ["hi"] * 4
        assert out["from_pid"] != os.getpid()
        assert other.spawn("async_caller", AsyncCaller).relay_async.call_one(targets, 42).get() == 42
