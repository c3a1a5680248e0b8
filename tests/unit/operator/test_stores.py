"""The pod cache: newer versions win, deleted uids are tombstoned (for a bounded time), priming
lists once, a relist repairs drift; reads return only the pods of the given mesh incarnation."""

import asyncio

from procmesh_operator import stores

from .builders import mesh, pod

KEY = ("ns", "m")


def primed_store(key=KEY):
    """A store whose mesh ``key`` was primed (listed, with no pods): its events are kept."""
    s = stores.PodStore()

    async def nothing():
        return []

    asyncio.run(s.prime(key, nothing))
    return s


def test_events_of_a_mesh_not_primed_are_not_kept():
    """Pods with the label of a mesh no reconcile has listed yet (or of none at all) do not
    fill the cache: its first reconcile lists them."""
    m = mesh()
    s = stores.PodStore()
    assert s.observe("ADDED", pod(m, 0)) == KEY
    assert s.pods_by_rank(KEY, "uid-m") == {}


def test_events_during_the_first_list_are_kept():
    m = mesh()
    s = stores.PodStore()

    async def lister():
        s.observe("MODIFIED", pod(m, 1, rv=20))  # arrives while the list is in flight
        return [pod(m, 0, rv=10), pod(m, 1, rv=9)]

    asyncio.run(s.prime(KEY, lister))
    assert {r: p["metadata"]["resourceVersion"] for r, p in s.pods_by_rank(KEY, "uid-m").items()} \
        == {0: "10", 1: "20"}
    s.observe("MODIFIED", pod(m, 0, rv=11))
    assert s.pods_by_rank(KEY, "uid-m")[0]["metadata"]["resourceVersion"] == "11"


def test_newer_resource_version_wins():
    m = mesh()
    s = stores.PodStore()
    s.observe("ADDED", pod(m, 0, rv=5, ready=False))
    s.upsert(pod(m, 0, rv=9))
    s.observe("MODIFIED", pod(m, 0, rv=7, ready=False))  # a late event
    assert s.pods_by_rank(KEY, "uid-m")[0]["metadata"]["resourceVersion"] == "9"


def test_tombstone_ignores_stale_events_until_deleted():
    m = mesh()
    s = primed_store()
    s.observe(None, pod(m, 1, uid="u1", phase="Failed"))
    s.forget("ns", "m", "m-1", "u1")
    s.observe("MODIFIED", pod(m, 1, uid="u1", phase="Failed", rv=11))
    assert 1 not in s.pods_by_rank(KEY, "uid-m")
    s.observe("DELETED", pod(m, 1, uid="u1"))
    s.observe("ADDED", pod(m, 1, uid="u2", rv=12))  # the new incarnation
    assert s.pods_by_rank(KEY, "uid-m")[1]["metadata"]["uid"] == "u2"


def test_deleted_event_of_old_incarnation_keeps_new_one():
    m = mesh()
    s = stores.PodStore()
    s.upsert(pod(m, 0, uid="new", rv=20))
    s.observe("DELETED", pod(m, 0, uid="old", rv=19))
    assert s.pods_by_rank(KEY, "uid-m")[0]["metadata"]["uid"] == "new"


def test_prime_lists_once_and_drops_vanished():
    m = mesh()
    s = stores.PodStore()
    s.observe("ADDED", pod(m, 0, rv=3))
    calls = []

    async def lister():
        calls.append(1)
        return [pod(m, 1, rv=4)]

    asyncio.run(s.prime(KEY, lister))
    asyncio.run(s.prime(KEY, lister))
    assert calls == [1] and sorted(s.pods_by_rank(KEY, "uid-m")) == [1]


def test_non_proc_pods_are_ignored():
    s = stores.PodStore()
    assert s.observe("ADDED", {"metadata": {"name": "x", "labels": {}}}) is None


def test_delete_response_after_deleted_event_does_not_resurrect():
    """Issue 12 item 1: the watch's DELETED event is handled before the DELETE response (with
    deletionTimestamp, an older resourceVersion) is upserted; the pod must stay gone."""
    m = mesh()
    s = stores.PodStore()
    s.observe("ADDED", pod(m, 1, uid="u1", phase="Failed", rv=10))
    s.observe("DELETED", pod(m, 1, uid="u1", phase="Failed", rv=12))
    s.upsert(pod(m, 1, uid="u1", phase="Failed", terminating=True, rv=11))  # the DELETE response
    assert 1 not in s.pods_by_rank(KEY, "uid-m")
    s.upsert(pod(m, 1, uid="u2", rv=13))  # the replacement is stored
    assert s.pods_by_rank(KEY, "uid-m")[1]["metadata"]["uid"] == "u2"


def test_delete_response_before_deleted_event_is_removed_by_it():
    m = mesh()
    s = stores.PodStore()
    s.observe("ADDED", pod(m, 1, uid="u1", phase="Failed", rv=10))
    s.upsert(pod(m, 1, uid="u1", phase="Failed", terminating=True, rv=11))
    assert s.pods_by_rank(KEY, "uid-m")[1]["metadata"].get("deletionTimestamp")
    s.observe("DELETED", pod(m, 1, uid="u1", rv=12))
    assert 1 not in s.pods_by_rank(KEY, "uid-m")


def test_old_incarnation_never_replaces_a_newer_one():
    m = mesh()
    s = stores.PodStore()
    s.upsert(pod(m, 0, uid="new", rv=20))
    s.observe("MODIFIED", pod(m, 0, uid="old", terminating=True, rv=18))
    assert s.pods_by_rank(KEY, "uid-m")[0]["metadata"]["uid"] == "new"


def test_tombstones_expire_and_are_bounded(monkeypatch):
    now = [0.0]
    s = stores.PodStore(clock=lambda: now[0])
    m = mesh()
    s.observe("DELETED", pod(m, 0, uid="u0"))
    assert s.is_buried("u0")
    now[0] = stores.TOMBSTONE_SECONDS + 1
    assert not s.is_buried("u0")
    s.observe("DELETED", pod(m, 1, uid="u1"))  # burying prunes the expired one
    assert s.tombstones() == 1
    monkeypatch.setattr(stores, "MAX_TOMBSTONES", 3)
    for i in range(10):
        s.forget("ns", "m", "m-0", f"x{i}")
    assert s.tombstones() == 3 and s.is_buried("x9") and not s.is_buried("x0")


def test_repair_drops_missed_deletes_and_adds_missed_pods():
    m = mesh(per_host=(("gpus", 4),))
    s = stores.PodStore()

    async def nothing():
        return []

    asyncio.run(s.prime(KEY, nothing))
    s.upsert(pod(m, 0, uid="a", rv=5))  # deleted while the watch was down: no DELETED event
    s.upsert(pod(m, 1, uid="b", rv=30))  # newer than the list: kept
    s.upsert(pod(m, 2, uid="c", rv=6, ready=False))
    listed = [pod(m, 2, uid="c", rv=8), pod(m, 3, uid="d", rv=9)]
    assert s.repair("ns", listed, list_rv=25) == {KEY}
    by_rank = s.pods_by_rank(KEY, "uid-m")
    assert sorted(by_rank) == [1, 2, 3]
    assert by_rank[2]["metadata"]["resourceVersion"] == "8"
    assert s.repair("ns", listed, list_rv=25) == set()  # nothing left to repair


def test_repair_ignores_buried_and_unprimed():
    m = mesh()
    other = mesh("o")
    s = stores.PodStore()

    async def nothing():
        return []

    asyncio.run(s.prime(KEY, nothing))
    s.observe("DELETED", pod(m, 0, uid="gone", rv=7))
    changed = s.repair("ns", [pod(m, 0, uid="gone", rv=6), pod(other, 0, rv=6)], list_rv=7)
    assert changed == set() and s.pods_by_rank(KEY, "uid-m") == {} and s.pods_by_rank(("ns", "o"), "uid-o") == {}


def test_reads_are_by_mesh_incarnation():
    m = mesh(per_host=(("procs", 3),))
    s = stores.PodStore()
    s.upsert(pod(m, 0, uid="mine", rv=30))
    earlier = pod(m, 1, uid="theirs", rv=20)  # same name and label, an earlier mesh's uid
    earlier["metadata"]["ownerReferences"][0]["uid"] = "uid-earlier"
    s.upsert(earlier)
    unowned = pod(m, 2, uid="stray", rv=21)
    unowned["metadata"]["ownerReferences"] = []
    s.upsert(unowned)
    assert {r: p["metadata"]["uid"] for r, p in s.pods_by_rank(KEY, "uid-m").items()} == \
        {0: "mine"}
    assert {r: p["metadata"]["uid"] for r, p in s.foreign_by_rank(KEY, "uid-m").items()} == \
        {1: "theirs", 2: "stray"}
    assert set(s.pods_by_rank(KEY, "uid-earlier")) == {1}


def test_other_procs_include_an_earlier_incarnation_of_the_same_name():
    """Pods of an earlier mesh of this name (another uid), terminating while garbage collection
    removes them, still hold their GPUs: the budget counts them with other meshes' pods; only
    this incarnation's own pods are left out."""
    now, earlier, other = mesh("m"), mesh("m"), mesh("o")
    own = pod(now, 0, uid="own")
    own["metadata"]["ownerReferences"] = [{"uid": "uid-now", "controller": True}]
    old = pod(earlier, 1, uid="old", terminating=True)
    old["metadata"]["ownerReferences"] = [{"uid": "uid-earlier", "controller": True}]
    theirs = pod(other, 0, uid="theirs")
    got = stores.other_procs([own, old, theirs], ("ns", "m"), "uid-now")
    assert [p["metadata"]["uid"] for p in got] == ["old", "theirs"]


def test_a_deletion_is_news_unless_the_kept_copy_already_said_so():
    """The first word of a pod's deletion makes the reconcile read its mesh fresh (it may be
    garbage collection after the mesh's own deletion); a delete of the operator's own, whose
    response was kept first, is no news."""
    m = mesh()
    s = primed_store()
    s.observe(None, pod(m, 0, uid="u0"))
    s.observe(None, pod(m, 1, uid="u1"))
    assert not s.deletion_is_news("MODIFIED", pod(m, 0, uid="u0", rv=11))  # not a deletion
    assert s.deletion_is_news("MODIFIED", pod(m, 0, uid="u0", rv=11, terminating=True))
    assert s.deletion_is_news("DELETED", pod(m, 0, uid="u0", rv=11))  # grace 0: no MODIFIED first
    s.upsert(pod(m, 1, uid="u1", rv=12, terminating=True))  # the operator's delete, answered
    assert not s.deletion_is_news("MODIFIED", pod(m, 1, uid="u1", rv=13, terminating=True))
    assert not s.deletion_is_news("DELETED", pod(m, 1, uid="u1", rv=14))
    assert not s.deletion_is_news("DELETED", pod(m, 0, uid="an-earlier-pod", rv=15))
    # A mesh this process has not listed: nothing kept can tell, so it is news.
    other = mesh(name="n")
    assert s.deletion_is_news("DELETED", pod(other, 0, rv=16))
