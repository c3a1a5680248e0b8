"""Leader election, decided purely (leading.py), and the queue's gate that follows it.

Aspects: a missing Lease is created; our own is renewed; a released one is taken at once; one
held by another is taken only after its record stayed unchanged for its whole duration on this
replica's clock (never comparing clocks); a take counts a transition and keeps the
resourceVersion as the write's precondition; the work queue runs nothing until the gate opens.
"""

import asyncio

from procmesh_operator import leading, queueing

ELECTION = leading.Election("ops", "procmesh-operator", "me", lease_seconds=15)


def lease(holder, renew="2026-12-04T10:00:00.000000Z", transitions=2, seconds=15, rv="7"):
    return {"metadata": {"name": "procmesh-operator", "namespace": "ops", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseTransitions": transitions,
                     "leaseDurationSeconds": seconds}}


def test_decide():
    assert leading.decide(None, "me", 0, 15) == leading.CREATE
    assert leading.decide(lease("me"), "me", 100, 15) == leading.RENEW
    assert leading.decide(lease(""), "me", 0, 15) == leading.TAKE  # released
    assert leading.decide(lease("other"), "me", 14.9, 15) == leading.WAIT
    assert leading.decide(lease("other"), "me", 15, 15) == leading.TAKE
    # The Lease's own duration rules, not ours.
    assert leading.decide(lease("other", seconds=60), "me", 30, 15) == leading.WAIT
    assert leading.decide(lease("other", seconds=1), "me", 1, 15) == leading.TAKE


def test_record_changes_with_each_renewal():
    assert leading.record_of(lease("a")) != leading.record_of(lease("a", renew="2026-12-04T10:00:02.000000Z"))
    assert leading.record_of(None) == ("", "", 0)
    assert leading.holder_of(lease(None)) == ""


def test_bodies():
    taken = leading.lease_body(ELECTION, lease("other"), leading.TAKE, 0.0)
    assert taken["metadata"] == {"name": "procmesh-operator", "namespace": "ops",
                                 "resourceVersion": "7"}
    spec = taken["spec"]
    assert spec["holderIdentity"] == "me" and spec["leaseTransitions"] == 3
    assert spec["acquireTime"] == spec["renewTime"] == "1970-01-01T00:00:00.000000Z"
    assert spec["leaseDurationSeconds"] == 15
    renewed = leading.lease_body(ELECTION, lease("me", transitions=3), leading.RENEW, 2.5)
    assert renewed["spec"]["leaseTransitions"] == 3 and "acquireTime" not in renewed["spec"]
    assert renewed["spec"]["renewTime"] == "1970-01-01T00:00:02.500000Z"
    created = leading.lease_body(ELECTION, None, leading.CREATE, 0.0)
    assert "resourceVersion" not in created["metadata"]
    assert created["spec"]["leaseTransitions"] == 0


def test_timing_follows_client_go():
    assert (ELECTION.renew_deadline, ELECTION.retry_seconds) == (10, 2)


def gated_queue():
    """A work queue behind a closed gate, its gate and the keys its worker ran."""
    gate, ran = asyncio.Event(), []

    async def worker(key):
        ran.append(key)

    return queueing.WorkQueue(worker, gate=gate.wait), gate, ran


def test_the_queue_waits_for_its_gate():
    async def main():
        q, gate, ran = gated_queue()
        q.enqueue("a")
        q.enqueue("b")
        await asyncio.sleep(0.05)
        before = list(ran)
        gate.set()
        while any(s.task for s in q._slots.values()):
            await asyncio.sleep(0.005)
        await q.close()
        return before, ran

    before, ran = asyncio.run(main())
    assert before == [] and sorted(ran) == ["a", "b"]


def test_closing_does_not_wait_for_keys_at_the_gate_nor_run_them():
    async def main():
        q, gate, ran = gated_queue()
        q.enqueue("a")
        await asyncio.sleep(0.01)
        # A drain that waited for the key at the gate would never end: bounded here.
        await asyncio.wait_for(q.close(drain=3600), timeout=60)
        gate.set()
        await asyncio.sleep(0.01)
        return ran

    assert asyncio.run(main()) == []
