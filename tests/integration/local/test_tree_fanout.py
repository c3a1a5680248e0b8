"""Tree fan-out (mesh_client._src.actor.trees, server.forwarding) on real local procs.

Aspects: a tree-routed call() returns every rank's value in rank order, on the whole mesh and
on slices; tree and flat give identical results, errors included; one sender's messages to one
actor keep their order when tree-routed casts interleave with call_one and sliced broadcasts,
and when the tree options change between messages (a mesh's route is fixed at its spawn);
a stop does not overtake the calls before it; a proc killed while forwarding (the controller's
direct child, or one a level deeper) fails the call at once with SupervisionError naming it,
while every other actor is still busy; a restarted forwarder forwards again, and its old actor
names the restart; a broadcast that raises kills its actors and reaches the fault hook.

The tree is forced on small meshes (``tree_fanout_min=1``) with k=2, so 7 procs make three
levels: the controller sends to 0 and 1; 0 forwards to 2 and 3, 1 to 4 and 5, 2 to 6.
"""

import os
import re
import signal

import pytest

from mesh_client import ActorError, SupervisionError, options, this_host
from mesh_client._src.actor import trees
from tests.integration.local.actors import Lambda, Recorder, raise_value_error

PROCS = 7
WAIT = 30.0  # a bound on every get(): a hang fails the test instead of the session
SURVIVOR_SLEEP = 600.0  # far longer than WAIT: an answer means nobody waited for the survivors


@pytest.fixture
def tree(monkeypatch):
    monkeypatch.setattr(options, "tree_fanout_min", 1)
    monkeypatch.setattr(options, "tree_branching", 2)


@pytest.fixture(scope="module")
def mesh():
    with this_host().spawn_procs(per_host={"gpus": PROCS}, name="tr") as procs:
        yield procs


def spawn_routed(mesh, name, tree_fanout_min, tree_branching=2):
    """Spawn with these options: an actor mesh's route is fixed when it is spawned."""
    before = options.tree_fanout_min, options.tree_branching
    options.tree_fanout_min, options.tree_branching = tree_fanout_min, tree_branching
    try:
        rec = mesh.spawn(name, Recorder)
    finally:
        options.tree_fanout_min, options.tree_branching = before
    rec.initialized.get(timeout=WAIT)
    return rec


@pytest.fixture(scope="module")
def recorders(mesh):
    return spawn_routed(mesh, "rec", 1)


def test_tree_call_returns_every_rank_in_rank_order(tree, recorders):
    ranks = recorders.where.call().get(timeout=WAIT)
    assert [p["message_rank"]["gpus"] for p in ranks.values()] == list(range(PROCS))
    assert len({p["pid"] for p in ranks.values()}) == PROCS
    sliced = recorders.slice(gpus=slice(2, 7)).echo.call("x").get(timeout=WAIT)
    assert [(dict(point), v) for point, v in sliced.items()] == [({"gpus": i}, "x") for i in range(5)]


def test_tree_and_flat_give_identical_results(mesh, recorders):
    flat_recorders = spawn_routed(mesh, "rec", 10**9)
    assert (trees.branching(recorders), trees.branching(flat_recorders)) == (2, 0)

    def outcomes(recorders) -> list:
        got = [
            [(dict(p), v) for p, v in recorders.where.call().get(timeout=WAIT).items()],
            [(dict(p), v) for p, v in recorders.slice(gpus=slice(3, 6)).echo.call(b"\0" * 1000).get(timeout=WAIT).items()],
            recorders.slice(gpus=6).where.call_one().get(timeout=WAIT),
            sorted(f.get(timeout=WAIT)["pid"] for f in recorders.where.stream()),
        ]
        with pytest.raises(ActorError) as info:
            recorders.fail.call("boom").get(timeout=WAIT)
        # call() raises the first failure to arrive (as Monarch's does): every rank fails, so
        # which rank it names depends on arrival; the rest of the error must be the same.
        return [*got, re.sub(r"tr\[gpus=\d+\]", "tr[gpus=N]", str(info.value))]

    assert outcomes(recorders) == outcomes(flat_recorders)


def test_big_values_travel_up_the_tree_intact(tree, recorders):
    blob = os.urandom(1 << 20)  # out-of-band buffers, nested in two levels of replies
    echoed = recorders.slice(gpus=slice(2, 7)).echo.call(blob).get(timeout=WAIT)
    assert all(value == blob for value in echoed.values()) and len(list(echoed.values())) == 5


def test_one_senders_messages_keep_their_order_across_casts_and_direct_calls(tree, mesh):
    rec = mesh.spawn("order", Recorder)
    deep, lower = rec.slice(gpus=6), rec.slice(gpus=slice(4, 7))
    sent = []
    for i in range(40):
        rec.record.broadcast(("all", i))
        deep.record.call_one(("one", i))  # the same path as the casts: it cannot overtake them
        lower.record.broadcast(("lower", i))
        sent += [("all", i), ("one", i), ("lower", i)]
    assert deep.history.call_one().get(timeout=WAIT) == sent
    top = rec.slice(gpus=0).history.call_one().get(timeout=WAIT)
    assert top == [m for m in sent if m[0] == "all"]


def test_changing_the_options_mid_flight_cannot_reorder_messages_to_a_mesh(mesh):
    rec = spawn_routed(mesh, "switch", 1)  # spawned tree-routed, k=2: gpus=6 is three hops away
    deep = rec.slice(gpus=6)
    sent = []
    before = options.tree_fanout_min, options.tree_branching
    try:
        for i in range(60):  # each message sent under other options than the one before
            options.tree_fanout_min, options.tree_branching = (10**9, 16) if i % 2 else (1, 3)
            rec.record.broadcast(i)  # no reply to wait for: only one path keeps them in order
            sent.append(i)
    finally:
        options.tree_fanout_min, options.tree_branching = before
    assert trees.branching(rec) == 2  # fixed at its spawn
    assert deep.history.call_one().get(timeout=WAIT) == sent
    fresh = spawn_routed(mesh, "later", 10**9)  # a mesh spawned later follows the new options
    assert trees.branching(fresh) == 0


def test_a_stop_does_not_overtake_the_calls_before_it(tree, mesh):
    rec = mesh.spawn("stopped", Recorder)
    rec.initialized.get(timeout=WAIT)
    pending = [rec.slice(gpus=6).record.call_one(i) for i in range(20)]
    rec.stop().get(timeout=WAIT)
    assert [f.get(timeout=WAIT) for f in pending] == list(range(1, 21))
    with pytest.raises(SupervisionError, match="stopped"):
        rec.slice(gpus=6).echo.call_one(0).get(timeout=WAIT)


@pytest.mark.parametrize("victim", [1, 2], ids=["controllers-child", "deeper-forwarder"])
def test_a_forwarder_killed_mid_call_fails_the_call_naming_it(tree, victim):
    with this_host().spawn_procs(per_host={"gpus": PROCS}, name=f"kill{victim}") as procs:
        rec = procs.spawn("rec", Recorder)
        pid = rec.slice(gpus=victim).where.call_one().get(timeout=WAIT)["pid"]
        pending = rec.sleep.call(SURVIVOR_SLEEP)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError) as info:
            pending.get(timeout=WAIT)
        message = str(info.value)
        assert f"kill{victim}[gpus={victim}]" in message and "Endpoint call rec.sleep() failed" in message
        # Its subtree stays unreachable through the tree, and says why at once.
        below = 6 if victim == 2 else 4
        with pytest.raises(SupervisionError, match=rf"kill{victim}\[gpus={victim}\]"):
            rec.slice(gpus=below).echo.call_one(1).get(timeout=WAIT)


def test_a_restarted_forwarder_forwards_again_and_its_old_actor_names_the_restart(tree, faults):
    with this_host().spawn_procs(per_host={"gpus": 4}, name="again") as procs:  # 0 forwards to 2 and 3
        rec = procs.spawn("rec", Recorder)
        assert list(rec.record.call("a").get(timeout=WAIT).values()) == [1, 1, 1, 1]
        os.kill(rec.slice(gpus=0).where.call_one().get(timeout=WAIT)["pid"], signal.SIGKILL)
        with pytest.raises(SupervisionError, match=r"again\[gpus=0\]"):
            rec.record.call("lost").get(timeout=WAIT)
        assert procs.reconnect() == [0]
        with pytest.raises(SupervisionError, match=r"proc again\[gpus=0\] was restarted .*re-spawn your actors"):
            rec.slice(gpus=0).echo.call_one(0).get(timeout=WAIT)
        # Through the new proc 0; "lost" never reached 3 (its forwarder was dead), but reached 1.
        assert rec.slice(gpus=3).record.call_one("b").get(timeout=WAIT) == 2
        assert rec.slice(gpus=1).history.call_one().get(timeout=WAIT) == ["a", "lost"]
        assert procs.respawn() == []  # nothing restarted since the reconnect


def test_a_failing_broadcast_through_the_tree_kills_that_actor_and_reaches_the_hook(tree, mesh, faults):
    lam = mesh.spawn("lam", Lambda)
    lam.slice(gpus=slice(5, 7)).run.broadcast(raise_value_error)  # no reply travels back up the tree
    failures = faults.wait("lam", 2)
    assert sorted(r for f in failures for r in f.crashed_ranks) == [5, 6]
    with pytest.raises(SupervisionError, match=r"Endpoint call lam\.run\(\) failed, The actor .*lam\{'gpus': 6/7\}"):
        lam.slice(gpus=6).run.call_one(os.getpid).get(timeout=WAIT)
    assert lam.slice(gpus=slice(0, 5)).run.call(lambda: "alive").get(timeout=WAIT).item(gpus=4) == "alive"
