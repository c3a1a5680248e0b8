"""An actor that waits for its own call is told so at once, instead of waiting for ever.

Aspects: call_one, call and choose to the waiting actor itself raise in its get() (so the outer
call fails with the reason and the actor lives on), in def and async def endpoints; a call to
another actor of the same mesh, an own call not waited for, and an actor mixing def and async def
endpoints whose concurrent endpoint waits for its def one (served meanwhile) work as before.
"""

import pytest

from mesh_client import ActorError, options, this_host
from tests.integration.local.actors import AsyncCallsItself, CallsItself, MixedCallsItself

WOULD_WAIT = r"Actor call me\.ask_back would wait for ever: it calls the actor that is waiting for it"


@pytest.fixture(scope="module")
def procs():
    with this_host().spawn_procs(per_host={"gpus": 2}, name="own") as mesh:
        yield mesh


@pytest.mark.parametrize("how", ["call_one", "call", "choose"])
def test_an_endpoint_waiting_for_its_own_call_raises_at_once(procs, how):
    me = procs.spawn("me", CallsItself)
    target = me.slice(gpus=0) if how != "call" else me
    one = me.slice(gpus=0)
    with pytest.raises(ActorError, match=WOULD_WAIT) as info:
        one.ask.call_one(target, how).get(timeout=60)
    assert isinstance(info.value.exception, RuntimeError)
    assert one.ask_back.call_one().get(timeout=60) == 0  # the actor lives on
    me.stop().get(timeout=60)


def test_an_async_endpoint_waiting_for_its_own_call_raises_at_once(procs):
    me = procs.spawn("me", AsyncCallsItself)
    with pytest.raises(ActorError, match=WOULD_WAIT):
        me.slice(gpus=1).ask.call_one(me.slice(gpus=1)).get(timeout=60)
    me.stop().get(timeout=60)


def test_calls_to_the_other_actors_of_its_mesh_and_unwaited_own_calls_work(procs):
    me = procs.spawn("me", CallsItself)
    assert me.slice(gpus=0).ask.call_one(me.slice(gpus=1), "call_one").get(timeout=60) == 0
    assert me.slice(gpus=1).ask.call_one(me.slice(gpus=0), "choose").get(timeout=60) == 0
    assert me.slice(gpus=0).ask.call_one(me.slice(gpus=0), "not waited").get(timeout=60) == "sent"
    me.stop().get(timeout=60)


def test_a_concurrent_endpoint_may_wait_for_its_own_def_endpoint(procs, monkeypatch):
    monkeypatch.setattr(options, "mixed_endpoints", True)
    me = procs.spawn("mixed", MixedCallsItself).slice(gpus=0)
    assert me.ask.call_one(me).get(timeout=60) == 7
    me.stop().get(timeout=60)
