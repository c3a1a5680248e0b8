"""An actor that waits for its own call is told so at once, instead of waiting for ever.

Aspects: call_one, call and choose to the waiting actor itself raise in its get() (so the outer
call fails with the reason and the actor lives on), in def and async def endpoints; iterating a
stream() over its mesh yields the other actors' replies, then raises where only its own is left
(in an async def endpoint too: the iteration blocks its loop); an async def endpoint's await of
its own call (call_one, call) raises, and says a concurrent endpoint may await it, which works; an await in a task of its own is not
refused (it could end); a call to another actor of the same mesh, an own call not waited for,
and an actor mixing def and async def endpoints whose concurrent endpoint waits for its def one
(served meanwhile) work as before, while that actor's other endpoints are refused as any.
"""

import pytest

from mesh_client import ActorError, options, this_host
from tests.integration.local.actors import (
    AsyncAwaitsItself,
    AsyncCallsItself,
    CallsItself,
    MixedCallsItself,
)

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


def test_a_stream_over_its_own_mesh_raises_once_only_its_own_call_is_left(procs):
    me = procs.spawn("me", CallsItself)
    with pytest.raises(ActorError, match=WOULD_WAIT):
        me.slice(gpus=0).ask.call_one(me, "stream").get(timeout=60)
    assert me.slice(gpus=0).ask.call_one(me.slice(gpus=1), "stream").get(timeout=60) == [0]  # another's: waited for
    me.stop().get(timeout=60)


@pytest.mark.parametrize("how", ["call_one", "call", "stream"])
def test_an_async_endpoint_awaiting_its_own_call_raises_at_once(procs, how):
    me = procs.spawn("me", AsyncAwaitsItself)
    target = me.slice(gpus=1) if how == "call_one" else me
    with pytest.raises(ActorError, match=WOULD_WAIT) as info:
        me.slice(gpus=1).ask.call_one(target, how).get(timeout=60)
    assert isinstance(info.value.exception, RuntimeError)
    # An await may be made in a concurrent endpoint instead; iterating a stream blocks the loop there too.
    assert ("or make the waiting endpoint a @concurrent_endpoint" in str(info.value)) == (how != "stream")
    assert me.slice(gpus=1).ask.call_one(me.slice(gpus=0), how).get(timeout=60) in (0, [0])  # another's: awaited
    me.stop().get(timeout=60)


def test_a_concurrent_endpoint_may_await_its_own_call(procs):
    me = procs.spawn("me", AsyncAwaitsItself).slice(gpus=0)
    assert me.ask_concurrently.call_one(me).get(timeout=60) == 0
    me.stop().get(timeout=60)


def test_an_await_in_a_task_of_its_own_is_not_refused(procs):
    """Its endpoint may end without it (here the task's timeout ends it), so it may end."""
    me = procs.spawn("me", AsyncAwaitsItself).slice(gpus=0)
    with pytest.raises(ActorError) as info:
        me.ask.call_one(me, "in a task of its own").get(timeout=60)
    assert isinstance(info.value.exception, TimeoutError)
    me.stop().get(timeout=60)


@pytest.mark.parametrize("how", ["await", "get", "def"])
def test_an_actor_mixing_kinds_is_refused_where_its_messages_wait(procs, monkeypatch, how):
    monkeypatch.setattr(options, "mixed_endpoints", True)
    me = procs.spawn("mixed", MixedCallsItself).slice(gpus=0)
    with pytest.raises(ActorError, match=r"Actor call mixed\.ask_back would wait for ever"):
        if how == "def":
            me.ask_from_def.call_one(me).get(timeout=60)
        else:
            me.ask_held.call_one(me, how).get(timeout=60)
    assert me.ask.call_one(me).get(timeout=60) == 7  # its concurrent endpoint still may wait
    me.stop().get(timeout=60)
