"""Endpoints and adverbs on real proc servers.

Aspects: call gives a ValueMesh laid out like the mesh; call_one needs one actor; choose; stream
yields every result; broadcast reaches every actor; async endpoints (not mixed with def ones
unless opted in); current_rank is relative to
the slice; a split mesh reaches the same actors under its new dimensions (and actors spawned on
split procs see them); several actor meshes share procs; messages from one caller stay in order.
"""

import pytest

from mesh_client import NotAnEndpoint, ValueMesh, as_endpoint, options
from tests.integration.local.actors import Adder, Mixed, Recorder


@pytest.fixture(scope="module")
def rec(procs):
    return procs.spawn("rec", Recorder, "first")


def test_call_gathers_one_value_per_point(rec):
    result = rec.echo.call(7).get()
    assert isinstance(result, ValueMesh)
    assert [(dict(p), v) for p, v in result] == [
        ({"hosts": 0, "gpus": 0}, 7),
        ({"hosts": 0, "gpus": 1}, 7),
        ({"hosts": 1, "gpus": 0}, 7),
        ({"hosts": 1, "gpus": 1}, 7),
    ]


def test_each_point_is_its_own_process(rec):
    pids = [w["pid"] for w in rec.where.call().get().values()]
    assert len(set(pids)) == 4


def test_call_one_requires_exactly_one_actor(rec):
    with pytest.raises(ValueError, match="call_one requires exactly 1 actor, but mesh has 4"):
        rec.echo.call_one(1)
    assert rec.slice(hosts=1, gpus=0).echo.call_one("x").get() == "x"


def test_current_rank_is_relative_to_the_slice(rec):
    sliced = rec.slice(hosts=1)
    info = sliced.where.call().get()
    assert info.item(gpus=1)["message_rank"] == {"gpus": 1}
    assert info.item(gpus=1)["size"] == {"gpus": 2}
    # the absolute rank stays the actor's place in the mesh it was spawned on
    assert info.item(gpus=1)["rank"] == {"hosts": 1, "gpus": 1}


def test_current_rank_follows_each_message_slice_when_they_alternate(rec):
    # The proc keeps one context per slice and point. The actor at hosts=0, gpus=1 is point 1
    # of the whole mesh and point 1 of the slice hosts=0: the same index, two slices.
    for _ in range(3):
        whole = rec.where.call().get().item(hosts=0, gpus=1)
        assert (whole["message_rank"], whole["size"]) == ({"hosts": 0, "gpus": 1}, {"hosts": 2, "gpus": 2})
        part = rec.slice(hosts=0).where.call().get().item(gpus=1)
        assert (part["message_rank"], part["size"]) == ({"gpus": 1}, {"gpus": 2})


def test_a_split_mesh_reaches_the_same_actors_under_its_new_dimensions(rec, procs):
    """Monarch's split: the whole mesh as one dimension of 4 split into a (2) by b (2)."""
    split = rec.flatten("all").split(all=("a", "b"), b=2)
    assert split.sizes == {"a": 2, "b": 2}
    info = split.where.call().get()
    assert info.item(a=1, b=0)["rank"] == {"hosts": 1, "gpus": 0}  # row-major: point 2 of 4
    assert info.item(a=1, b=0)["message_rank"] == {"a": 1, "b": 0}
    pids = [w["pid"] for w in rec.where.call().get().values()]
    assert [w["pid"] for w in info.values()] == pids
    on_split_procs = procs.split(gpus=("x", "y"), y=1).spawn("on_split", Recorder)
    assert on_split_procs.sizes == {"hosts": 2, "x": 2, "y": 1}
    assert on_split_procs.slice(hosts=1, x=1, y=0).where.call_one().get()["rank"] == {"hosts": 1, "x": 1, "y": 0}


def test_choose_reaches_one_actor(rec):
    assert rec.echo.choose(5).get() == 5


def test_stream_yields_every_result(rec):
    futures = list(rec.where.stream())
    assert len(futures) == 4
    assert sorted(tuple(f.get()["rank"].values()) for f in futures) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_broadcast_reaches_every_actor(procs):
    r = procs.spawn("bcast", Recorder)
    assert r.record.broadcast("hello") is None
    # the next call from the same caller is handled after the broadcast
    assert list(r.history.call().get().values()) == [["hello"]] * 4


def test_async_endpoints(procs):
    assert list(procs.spawn("adder", Adder).add_later.call(2, 3).get().values()) == [5] * 4


def test_futures_can_be_awaited(procs):
    import asyncio

    adder = procs.spawn("adder2", Adder)

    async def main():
        return await adder.slice(hosts=0, gpus=0).add_later.call_one(1, 1)

    assert asyncio.run(main()) == 2


def test_mixing_def_and_async_def_endpoints_is_refused_unless_opted_in(procs, monkeypatch):
    with pytest.raises(ValueError, match="mixes both async and sync endpoints.*sync: \\['sync_one'\\] async: \\['async_one'\\]"):
        procs.spawn("mixed", Mixed)
    monkeypatch.setattr(options, "mixed_endpoints", True)
    mixed = procs.spawn("mixed", Mixed).slice(hosts=0, gpus=0)
    assert (mixed.sync_one.call_one().get(), mixed.async_one.call_one().get()) == (1, 2)


def test_messages_from_one_caller_stay_in_order(procs):
    r = procs.spawn("order", Recorder).slice(hosts=0, gpus=1)
    futures = [r.record.call_one(i) for i in range(500)]
    assert [f.get() for f in futures] == list(range(1, 501))
    assert r.history.call_one().get() == list(range(500))


def test_several_actor_meshes_share_the_procs(procs, rec):
    other = procs.spawn("second", Recorder, "second")
    a = rec.where.call().get()
    b = other.where.call().get()
    assert [v["pid"] for v in a.values()] == [v["pid"] for v in b.values()]
    assert {v["tag"] for v in b.values()} == {"second"}


def test_a_method_without_endpoint_names_the_fix(rec):
    with pytest.raises(NotAnEndpoint, match="add a @endpoint decorator"):
        rec.not_an_endpoint.call()
    assert list(as_endpoint(rec.not_an_endpoint).call().get().values()) == [None] * 4
    with pytest.raises(AttributeError):
        rec.no_such_method  # noqa: B018


def test_large_payloads_roundtrip(rec):
    blob = bytes(range(256)) * 8192  # 2 MiB
    assert rec.slice(hosts=0, gpus=0).echo.call_one(blob).get() == blob


def test_spawn_refuses_non_actor_classes(procs):
    with pytest.raises(ValueError, match="not an Actor subclass"):
        procs.spawn("x", dict)
