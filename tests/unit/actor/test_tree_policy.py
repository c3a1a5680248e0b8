"""The automatic tree rule: from 64 procs, when they are on other hosts or this host has 10+ cores."""

import pytest

from mesh_client._src.actor import tree_policy


def local(n):
    return [("127.0.0.1", 20000 + i) for i in range(n)]


def pods(n):
    return [(f"10.244.{i // 200}.{i % 200 + 2}", 26600) for i in range(n)]


def test_small_groups_stay_flat_wherever_they_are():
    for cores in (2, 16, 128):
        assert not tree_policy.takes_tree(local(63), None, cores)
        assert not tree_policy.takes_tree(pods(63), None, cores)


def test_local_procs_take_the_tree_only_on_a_host_with_cores_for_them():
    assert not tree_policy.takes_tree(local(1024), None, 2)
    assert not tree_policy.takes_tree(local(1024), None, 9)
    assert tree_policy.takes_tree(local(64), None, 10)
    assert tree_policy.takes_tree(local(64), None, 16)


def test_procs_on_other_hosts_take_the_tree_from_64_on_any_controller():
    assert tree_policy.takes_tree(pods(64), None, 2)
    mixed = local(32) + pods(32)
    assert tree_policy.takes_tree(mixed, None, 2)
    assert not tree_policy.takes_tree([("::1", 1)] * 64, None, 2)
    assert not tree_policy.takes_tree([("localhost", 1)] * 64, None, 2)


def test_a_number_decides_alone():
    assert tree_policy.takes_tree(local(2), 2, 2)
    assert not tree_policy.takes_tree(local(1), 2, 128)
    assert not tree_policy.takes_tree(pods(4096), 0, 128)


def test_the_environment_value_is_checked():
    assert tree_policy.parse_minimum("auto") is None
    assert tree_policy.parse_minimum(" AUTO ") is None
    assert tree_policy.parse_minimum("") is None
    assert tree_policy.parse_minimum("0") == 0
    assert tree_policy.parse_minimum("48") == 48
    for bad in ("-1", "many", "1.5"):
        with pytest.raises(ValueError, match="PROCMESH_TREE_FANOUT_MIN=.*give 'auto'"):
            tree_policy.parse_minimum(bad)


def test_usable_cores_counts_this_process_affinity():
    import os

    assert tree_policy.usable_cores() == len(os.sched_getaffinity(0))


def test_an_actor_mesh_fixes_its_route_by_the_rule_at_spawn(monkeypatch):
    from mesh_client._src.actor import trees
    from mesh_client._src.actor.options import options
    from mesh_client._src.actor.procs import ProcGroup

    group = ProcGroup("big", pods(64), b"t" * 32, [f"big[{i}]" for i in range(64)])
    monkeypatch.setattr(options, "tree_fanout_min", None)
    monkeypatch.setattr(options, "tree_branching", 16)
    try:
        assert trees.fix_route("auto-mesh", group) == 16
        monkeypatch.setattr(options, "tree_fanout_min", 0)
        assert trees.fix_route("flat-mesh", group) == 0
        assert trees.fix_route("auto-mesh", group) == 16  # kept from its spawn
        monkeypatch.setattr(options, "tree_fanout_min", 65)
        assert trees.fix_route("too-small", group) == 0
    finally:
        for name in ("auto-mesh", "flat-mesh", "too-small"):
            trees.forget_route(name)
