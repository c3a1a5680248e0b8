"""pods_by_rank answers from a cache kept per mesh until that mesh's pods change: every write
path (events, the operator's own upserts and forgets, priming, a repairing relist, unpriming)
shows in the next read, and a caller changing its answer changes nothing kept."""

import asyncio

from procmesh_operator import stores

from .builders import mesh, pod

KEY = ("ns", "m")


def ranks(s: stores.PodStore) -> dict[int, str]:
    return {r: p["metadata"]["resourceVersion"] for r, p in s.pods_by_rank(KEY, "uid-m").items()}


def primed_store():
    """A store whose mesh KEY was primed (listed, with no pods): its events are kept."""
    s = stores.PodStore()

    async def nothing():
        return []

    asyncio.run(s.prime(KEY, nothing))
    return s


def test_every_write_shows_in_the_next_read():
    m = mesh()
    s = primed_store()
    s.observe("ADDED", pod(m, 0, rv=5))
    assert ranks(s) == {0: "5"}
    s.observe("MODIFIED", pod(m, 0, rv=6))
    s.upsert(pod(m, 1, rv=7))
    assert ranks(s) == {0: "6", 1: "7"}
    s.forget("ns", "m", "m-1", "pod-uid-m-1")
    assert ranks(s) == {0: "6"}
    s.observe("DELETED", pod(m, 0, rv=8))
    assert ranks(s) == {}


def test_priming_repairing_and_unpriming_show_too():
    m = mesh()
    s = stores.PodStore()
    s.upsert(pod(m, 0, rv=5))
    assert ranks(s) == {0: "5"}

    async def lister():
        return [pod(m, 1, rv=6)]

    asyncio.run(s.prime(KEY, lister))
    assert ranks(s) == {1: "6"}  # rank 0 was gone before the list
    s.repair("ns", [pod(m, 1, rv=9)], 10)
    assert ranks(s) == {1: "9"}
    s.repair("ns", [], 11)
    assert ranks(s) == {}
    s.upsert(pod(m, 0, rv=12))
    assert ranks(s) == {0: "12"}
    s.unprime(KEY)
    assert ranks(s) == {}


def test_a_caller_changing_its_answer_changes_nothing_kept():
    m = mesh()
    s = stores.PodStore()
    s.upsert(pod(m, 0, rv=5))
    s.pods_by_rank(KEY, "uid-m").pop(0)
    assert ranks(s) == {0: "5"}
    assert s.pods_by_rank(KEY, "another-uid") == {}


def test_managed_fields_are_not_kept():
    m = mesh()
    s = stores.PodStore()
    body = pod(m, 0, rv=5)
    body["metadata"]["managedFields"] = [{"manager": "kube-scheduler", "fieldsV1": {"f:spec": {}}}]
    s.upsert(body)
    kept = s.pods_by_rank(KEY, "uid-m")[0]
    assert "managedFields" not in kept["metadata"] and kept["metadata"]["name"] == "m-0"
    assert "managedFields" in body["metadata"]  # the caller's body is left as it was


def test_own_and_foreign_pods_come_from_one_partition_that_follows_writes():
    """Both reads come from one pass over the mesh's pods by controller: an incarnation's own
    pods, and the others' (an earlier incarnation's, an unowned pod's) holding rank names."""
    m = mesh(per_host=(("gpus", 3),))
    s = primed_store()
    s.upsert(pod(m, 0, rv=5))
    earlier = pod(m, 1, rv=6, uid="earlier-pod")
    earlier["metadata"]["ownerReferences"][0]["uid"] = "uid-earlier"
    s.upsert(earlier)
    unowned = pod(m, 2, rv=7, uid="unowned-pod")
    unowned["metadata"]["ownerReferences"] = []
    s.upsert(unowned)
    assert sorted(s.pods_by_rank(KEY, "uid-m")) == [0]
    assert {r: p["metadata"]["uid"] for r, p in s.foreign_by_rank(KEY, "uid-m").items()} == \
        {1: "earlier-pod", 2: "unowned-pod"}
    assert sorted(s.pods_by_rank(KEY, "uid-earlier")) == [1]
    s.upsert(pod(m, 1, rv=9))  # rank 1's name now holds this incarnation's pod
    assert sorted(s.pods_by_rank(KEY, "uid-m")) == [0, 1]
    assert sorted(s.foreign_by_rank(KEY, "uid-m")) == [2]
    assert not s.pods_by_rank(KEY, "uid-earlier")
    s.foreign_by_rank(KEY, "uid-m").clear()  # a caller's change reaches nothing kept
    assert sorted(s.foreign_by_rank(KEY, "uid-m")) == [2]
