"""The pod cache: newer versions win, our deletes are tombstoned, priming lists once."""

import asyncio

from procmesh_operator import stores

from .builders import mesh, pod

KEY = ("ns", "m")


def test_newer_resource_version_wins():
    m = mesh()
    s = stores.PodStore()
    s.observe("ADDED", pod(m, 0, rv=5, ready=False))
    s.upsert(pod(m, 0, rv=9))
    s.observe("MODIFIED", pod(m, 0, rv=7, ready=False))  # a late event
    assert s.pods_by_rank(KEY)[0]["metadata"]["resourceVersion"] == "9"


def test_tombstone_ignores_stale_events_until_deleted():
    m = mesh()
    s = stores.PodStore()
    s.observe(None, pod(m, 1, uid="u1", phase="Failed"))
    s.forget("ns", "m", "m-1", "u1")
    s.observe("MODIFIED", pod(m, 1, uid="u1", phase="Failed", rv=11))
    assert 1 not in s.pods_by_rank(KEY)
    s.observe("DELETED", pod(m, 1, uid="u1"))
    s.observe("ADDED", pod(m, 1, uid="u2", rv=12))  # the new incarnation
    assert s.pods_by_rank(KEY)[1]["metadata"]["uid"] == "u2"


def test_deleted_event_of_old_incarnation_keeps_new_one():
    m = mesh()
    s = stores.PodStore()
    s.upsert(pod(m, 0, uid="new", rv=20))
    s.observe("DELETED", pod(m, 0, uid="old", rv=19))
    assert s.pods_by_rank(KEY)[0]["metadata"]["uid"] == "new"


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
    assert calls == [1] and sorted(s.pods_by_rank(KEY)) == [1]


def test_non_proc_pods_are_ignored():
    s = stores.PodStore()
    assert s.observe("ADDED", {"metadata": {"name": "x", "labels": {}}}) is None
