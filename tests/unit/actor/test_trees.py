"""The pure parts of tree fan-out (mesh_client._src.actor.trees): shape, pruning, wire form,
aggregated replies.

Aspects: every rank has exactly one path from the controller, and the tree's parent/children
agree with it; the controller sends to at most k procs and each proc to at most k; pruning to
some targets keeps exactly their paths; the wire form delivers each target once with its
slice index; the reply table round-trips; an aggregate completes once, at once when a part is
lost; the tree is off unless asked for.
"""

import pickle

import pytest

from mesh_client._src.actor import options as options_mod
from mesh_client._src.actor import trees
from mesh_client._src.runtime import peers


@pytest.mark.parametrize("n,k", [(1, 2), (7, 2), (64, 16), (512, 16), (1000, 7), (300, 1)])
def test_every_rank_has_one_path_that_parent_and_children_agree_on(n, k):
    reached = list(trees.top(n, k))
    frontier = list(reached)
    while frontier:
        below = [c for r in frontier for c in trees.children(r, n, k)]
        reached += below
        frontier = below
    assert sorted(reached) == list(range(n))  # each rank once
    for r in range(n):
        hops = trees.path(r, k)
        assert hops[-1] == r and (hops[0] in trees.top(n, k))
        assert all(trees.parent(b, k) == a for a, b in zip(hops, hops[1:]))
        up = trees.parent(r, k)
        assert r in (trees.top(n, k) if up < 0 else trees.children(up, n, k))
    assert len(trees.top(n, k)) <= k and all(len(trees.children(r, n, k)) <= k for r in range(n))


def test_depth_grows_with_the_log_of_the_size():
    assert [trees.depth(n, 16) for n in (1, 16, 17, 272, 273, 512)] == [1, 1, 2, 2, 3, 3]
    assert trees.depth(0, 16) == 0


def test_pruning_keeps_exactly_the_paths_to_the_targets():
    kids = trees.prune([6, 4], 2)  # paths 0->2->6 and 1->4
    assert kids == {-1: [0, 1], 0: [2], 2: [6], 1: [4]}
    full = trees.prune(range(7), 2)
    assert full == {-1: [0, 1], 0: [2, 3], 1: [4, 5], 2: [6]}


def test_wire_nodes_deliver_each_target_once_with_its_slice_index():
    addresses = [("127.0.0.1", 1000 + r) for r in range(20)]
    displays = [f"m[{r}]" for r in range(20)]
    proc_ids = [f"id{r}" for r in range(20)]
    index_of = {r: i for i, r in enumerate([5, 9, 13, 19])}  # a slice of the group
    nodes = trees.wire_nodes(trees.prune(index_of, 3), index_of, addresses, displays, proc_ids)
    delivered = sorted(i for node in nodes for i in trees.subtree_indices(node))
    assert delivered == [0, 1, 2, 3]

    def walk(node):
        index, rank, address, display, kids, proc_id = node
        assert address == addresses[rank] and display == displays[rank]
        assert proc_id == proc_ids[rank]  # the proc a forwarder's handshake names
        assert index == index_of.get(rank, -1)  # interior procs outside the slice only forward
        for kid in kids:
            assert trees.parent(kid[1], 3) == rank
            walk(kid)

    for node in nodes:
        assert trees.parent(node[1], 3) == -1
        walk(node)
    pickle.loads(pickle.dumps(nodes))  # plain data on the wire


def test_the_reply_table_round_trips_segments_per_entry():
    entries = [((2, peers.OK, 2, None), [b"a", b"bc"]), ((0, peers.ERROR, 1, None), [b"e"]), ((1, peers.LOST, 0, "gone"), [])]
    decoded = trees.decode_table(trees.encode_table(entries))
    assert decoded == [(e, list(s)) for e, s in entries]
    assert trees.decode_table([]) == []


def test_nested_child_replies_flatten_at_the_controller():
    leaf = trees.encode_table([((3, peers.OK, 1, None), [b"c"])])
    middle = trees.encode_table([((1, peers.OK, 1, None), [b"a"]), trees.nested(leaf)])
    top = trees.encode_table([((0, peers.ERROR, 1, None), [b"e"]), trees.nested(middle)])
    assert trees.decode_table(top) == [
        ((0, peers.ERROR, 1, None), [b"e"]), ((1, peers.OK, 1, None), [b"a"]), ((3, peers.OK, 1, None), [b"c"])
    ]


def test_an_aggregate_completes_once_when_every_part_arrived():
    done = []
    agg = trees.Aggregate(2, lambda status, payload: done.append((status, trees.decode_table(payload))))
    agg.add([((0, peers.OK, 0, None), [])])
    assert done == []
    agg.add([trees.nested(trees.encode_table([((1, peers.OK, 1, None), [b"x"]), ((2, peers.OK, 0, None), [])]))])  # a child's reply
    agg.add([((3, peers.OK, 0, None), [])])  # late and extra: ignored
    assert done == [(peers.OK, [((0, peers.OK, 0, None), []), ((1, peers.OK, 1, None), [b"x"]), ((2, peers.OK, 0, None), [])])]


def test_an_aggregate_with_a_lost_part_completes_at_once():
    done = []
    agg = trees.Aggregate(3, lambda status, payload: done.append((status, trees.decode_table(payload))))
    agg.add([((4, peers.LOST, 0, "m[4] failed"), [])])
    assert done == [(trees.SUBTREE_LOST, [((4, peers.LOST, 0, "m[4] failed"), [])])]
    agg.add([((0, peers.OK, 0, None), [])])
    assert len(done) == 1


def test_an_empty_aggregate_completes_at_once():
    done = []
    trees.Aggregate(0, lambda status, payload: done.append(status))
    assert done == [peers.OK]


def test_the_tree_is_automatic_by_default_and_the_environment_sets_it(monkeypatch):
    monkeypatch.delenv("PROCMESH_TREE_FANOUT_MIN", raising=False)
    assert options_mod.Options().tree_fanout_min is None
    monkeypatch.setenv("PROCMESH_TREE_FANOUT_MIN", "0")
    assert options_mod.Options().tree_fanout_min == 0
    monkeypatch.setenv("PROCMESH_TREE_FANOUT_MIN", "128")
    monkeypatch.setenv("PROCMESH_TREE_BRANCHING", "8")
    assert (options_mod.Options().tree_fanout_min, options_mod.Options().tree_branching) == (128, 8)
