"""One reconcile's decision: create missing pods, restart by policy, suspend, refuse.

Aspects: creation of missing ranks; RestartProc deletes the failed incarnation and counts;
RestartMesh deletes all and waits for them to be gone; Never keeps failures; maxRestarts;
suspend deletes everything; terminating pods are not recreated early; refusals create nothing;
pods of an earlier incarnation are waited for, never counted, restarted or deleted; a failed
pod is marked with the count of its restart, and a marked pod (its count written, the operator
killed before the delete) is deleted without counting again.
"""

import pytest

from procmesh_operator import crashloops, names, planning

from .builders import SETTINGS, mesh, node, pod


def plan(m, pods, restarts=0, **kw):
    return planning.plan(m, restarts=restarts, pods=pods, settings=SETTINGS, **kw)


def test_creates_missing_ranks_only():
    m = mesh(per_host=(("procs", 3),))
    p = plan(m, {1: pod(m, 1)})
    assert sorted(p.creates) == [0, 2] and not p.deletes and p.restarts == 0


def test_restart_proc_deletes_failed_incarnation_and_counts():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=2)
    pods = {0: pod(m, 0), 1: pod(m, 1, phase="Failed", uid="dead")}
    p = plan(m, pods, restarts=1)
    assert p.deletes == (("m-1", "dead"),) and p.restarts == 2 and p.restarted == ("m-1",)
    assert not p.creates  # the name is free only once the old pod is gone
    again = plan(m, {0: pod(m, 0)}, restarts=2)
    assert sorted(again.creates) == [1] and again.restarts == 2


def test_restart_limit_keeps_failure():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=1)
    p = plan(m, {0: pod(m, 0), 1: pod(m, 1, phase="Failed")}, restarts=1)
    assert not p.deletes and p.restart_limit_reached and p.failed == (1,) and p.restarts == 1


def test_never_keeps_failure_without_counting():
    m = mesh(per_host=(("procs", 2),), restartPolicy="Never")
    p = plan(m, {0: pod(m, 0), 1: pod(m, 1, phase="Succeeded")})
    assert not p.deletes and not p.creates and p.failed == (1,) and p.restarts == 0


def test_restart_mesh_deletes_all_then_waits_until_gone():
    m = mesh(per_host=(("procs", 3),), restartPolicy="RestartMesh")
    pods = {0: pod(m, 0), 1: pod(m, 1, phase="Failed"), 2: pod(m, 2)}
    p = plan(m, pods)
    assert sorted(n for n, _ in p.deletes) == ["m-0", "m-1", "m-2"]
    assert p.restarts == 1 and p.restarted == ("m",) and not p.creates
    draining = plan(m, {2: pod(m, 2, terminating=True)}, restarts=1)
    assert not draining.creates and not draining.deletes
    assert sorted(plan(m, {}, restarts=1).creates) == [0, 1, 2]


def test_terminating_pod_is_not_replaced_early():
    m = mesh(per_host=(("procs", 2),))
    p = plan(m, {0: pod(m, 0, terminating=True), 1: pod(m, 1)})
    assert not p.creates and not p.deletes


def test_suspend_deletes_every_live_pod_and_creates_nothing():
    m = mesh(per_host=(("procs", 3),), suspend=True)
    p = plan(m, {0: pod(m, 0), 1: pod(m, 1, terminating=True)}, restarts=2)
    assert p.deletes == (("m-0", "pod-uid-m-0"),) and not p.creates and p.restarts == 2


def test_refusal_creates_nothing():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 5]})
    p = plan(m, {}, nodes={"n1": node("n1", gpus=2)})
    assert p.refusal is not None and not p.creates


def earlier(m, rank, **kw):
    body = pod(m, rank, uid=f"earlier-{rank}", **kw)
    body["metadata"]["ownerReferences"][0]["uid"] = "uid-earlier"
    return body


@pytest.mark.parametrize("policy", ["Never", "RestartProc"])
def test_ranks_held_by_an_earlier_incarnation_wait(policy):
    m = mesh(per_host=(("procs", 3),), restartPolicy=policy)
    p = plan(m, {}, foreign={0: earlier(m, 0), 1: earlier(m, 1, phase="Failed")})
    assert sorted(p.creates) == [2]  # the free name only
    assert not p.deletes and not p.failed and p.restarts == 0 and not p.restarted
    assert p.foreign == ("m-0", "m-1")


def test_restart_mesh_creates_nothing_while_an_earlier_incarnation_remains():
    m = mesh(per_host=(("procs", 3),), restartPolicy="RestartMesh")
    p = plan(m, {}, foreign={1: earlier(m, 1, terminating=True)})
    assert not p.creates and not p.deletes and p.foreign == ("m-1",)
    assert sorted(plan(m, {}).creates) == [0, 1, 2]


RAN = {0: "Running", 1: "Running", 2: "Running"}


@pytest.mark.parametrize("terminating", [False, True])
def test_a_pod_deleted_under_a_running_proc_is_a_failure_under_restart_mesh(terminating):
    m = mesh(per_host=(("procs", 3),), restartPolicy="RestartMesh", maxRestarts=1)
    pods = {0: pod(m, 0), 2: pod(m, 2)}
    if terminating:
        pods[1] = pod(m, 1, terminating=True)
    p = plan(m, pods, last_phases=RAN)
    assert p.restarts == 1 and p.restarted == ("m",) and p.lost_procs == (1,)
    assert sorted(n for n, _ in p.deletes) == ["m-0", "m-2"] and not p.creates
    limited = plan(m, pods, restarts=1, last_phases=RAN)
    assert limited.restart_limit_reached and limited.failed == (1,) and limited.deleted == (1,)
    assert not limited.creates and not limited.deletes and limited.restarts == 1


def test_a_pod_deleted_under_a_running_proc_stays_failed_under_never():
    m = mesh(per_host=(("procs", 3),), restartPolicy="Never")
    p = plan(m, {0: pod(m, 0), 2: pod(m, 2)}, last_phases=RAN)
    assert p.failed == (1,) and p.deleted == (1,) and not p.creates and p.restarts == 0
    # Its entry then says Deleted, and it stays failed at every later reconcile.
    again = plan(m, {0: pod(m, 0), 2: pod(m, 2)}, last_phases={**RAN, 1: planning.DELETED})
    assert again.failed == (1,) and not again.creates
    # A failed proc's pod deleted afterwards (a clean-up) is not brought back either.
    cleaned = plan(m, {0: pod(m, 0), 2: pod(m, 2)}, last_phases={**RAN, 1: "Failed"})
    assert cleaned.failed == (1,) and not cleaned.creates


def test_a_pod_deleted_under_a_running_proc_is_counted_once_under_restart_proc():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=2)
    going = plan(m, {0: pod(m, 0), 1: pod(m, 1, terminating=True)}, last_phases=RAN)
    assert going.restarts == 1 and going.restarted == ("m-1",) and not going.deletes
    assert not going.creates  # its name is free once it is gone
    # The status then says Terminating: its disappearance is not counted again.
    gone = plan(m, {0: pod(m, 0)}, restarts=1, last_phases={0: "Running", 1: "Terminating"})
    assert gone.restarts == 1 and sorted(gone.creates) == [1] and not gone.failed
    at_once = plan(m, {0: pod(m, 0)}, last_phases=RAN)  # gone before any reconcile saw it go
    assert at_once.restarts == 1 and sorted(at_once.creates) == [1]


def _disrupted(m, rank, reason):
    p = pod(m, rank, terminating=True)
    p["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": reason})
    return p


@pytest.mark.parametrize("reason", ["EvictionByEvictionAPI", "PreemptionByScheduler"])
def test_a_proc_taken_by_a_drain_or_a_preemption_is_restarted_without_counting(reason):
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=1)
    # At the limit already: a proc's own failure would stay failed, a drain's eviction does not.
    p = plan(m, {0: pod(m, 0), 1: _disrupted(m, 1, reason)}, restarts=1, last_phases=RAN)
    assert p.restarted == ("m-1",) and p.restarts == 1 and not p.restart_limit_reached
    assert p.uncounted == {1: reason} and not p.failed
    whole = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=1)
    q = plan(whole, {0: pod(whole, 0), 1: _disrupted(whole, 1, reason)}, restarts=1, last_phases=RAN)
    assert q.restarted == ("m",) and q.restarts == 1 and q.uncounted == {1: reason}


def test_a_kubelets_eviction_counts_and_so_does_a_drain_beside_a_failure():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=2)
    # The kubelet evicts a pod over its own ephemeral-storage limit: its proc's fault.
    kubelet = plan(m, {0: pod(m, 0), 1: _disrupted(m, 1, "TerminationByKubelet")}, last_phases=RAN)
    assert kubelet.restarts == 1 and not kubelet.uncounted
    # One proc evicted, another failed by itself: the mesh's restart counts.
    both = plan(m, {0: pod(m, 0, phase="Failed"), 1: _disrupted(m, 1, "EvictionByEvictionAPI")},
                last_phases=RAN)
    assert both.restarts == 1 and not both.uncounted
    never = mesh(per_host=(("procs", 2),), restartPolicy="Never")
    kept = plan(never, {0: pod(never, 0), 1: _disrupted(never, 1, "EvictionByEvictionAPI")}, last_phases=RAN)
    assert kept.failed == (1,) and not kept.uncounted and not kept.restarted


def test_a_raised_limit_restarts_a_proc_whose_pod_was_deleted():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=1)
    p = plan(m, {0: pod(m, 0)}, restarts=0, last_phases={0: "Running", 1: planning.DELETED})
    assert p.restarts == 1 and sorted(p.creates) == [1] and not p.failed


@pytest.mark.parametrize("phase", [None, "Pending", "Terminating"])
def test_a_pod_deleted_before_its_proc_ran_is_recreated_without_counting(phase):
    m = mesh(per_host=(("procs", 2),), restartPolicy="Never")
    last = {0: "Running"} if phase is None else {0: "Running", 1: phase}
    p = plan(m, {0: pod(m, 0)}, last_phases=last)
    assert sorted(p.creates) == [1] and not p.failed and p.restarts == 0 and not p.lost_procs


def test_a_pod_deleted_while_suspended_is_not_a_failure():
    m = mesh(per_host=(("procs", 2),), restartPolicy="Never", suspend=True)
    p = plan(m, {0: pod(m, 0, terminating=True)}, last_phases=RAN)
    assert not p.failed and not p.lost_procs


def _marked(m, rank, restarts, **kw):
    body = pod(m, rank, **kw)
    body["metadata"]["annotations"][names.RESTART_COUNTED_ANNOTATION] = str(restarts)
    return body


def test_a_counted_failure_is_marked_with_its_count():
    m = mesh(per_host=(("procs", 3),), restartPolicy="RestartProc", maxRestarts=5)
    p = plan(m, {0: pod(m, 0, phase="Failed"), 1: pod(m, 1), 2: pod(m, 2, phase="Failed")},
             restarts=1)
    assert p.restarts == 3 and p.marks == (("m-0", "pod-uid-m-0", 2), ("m-2", "pod-uid-m-2", 3))
    whole = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=5)
    q = plan(whole, {0: pod(whole, 0), 1: pod(whole, 1, phase="Failed")}, restarts=1)
    assert q.restarts == 2 and q.marks == (("m-1", "pod-uid-m-1", 2),)
    # A lost proc (its pod gone) is not marked: its Terminating entry records it.
    lost = plan(m, {0: pod(m, 0), 2: pod(m, 2)}, last_phases={0: "Running", 1: "Running"})
    assert lost.restarts == 1 and not lost.marks


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_a_marked_failure_counted_in_status_is_restarted_without_counting_again(policy):
    """The operator wrote the count (status.restarts 1, at maxRestarts) and was killed before
    deleting the failed pod: the restart goes on, neither counted twice nor refused."""
    m = mesh(per_host=(("procs", 2),), restartPolicy=policy, maxRestarts=1)
    pods = {0: pod(m, 0), 1: _marked(m, 1, 1, phase="Failed", uid="dead")}
    p = plan(m, pods, restarts=1, last_phases={0: "Terminating", 1: "Terminating"})
    assert p.restarts == 1 and not p.restart_limit_reached and not p.failed and not p.marks
    assert ("m-1", "dead") in p.deletes
    # Marked, but the count never reached status (killed before that write): counted now.
    q = plan(m, pods, restarts=0)
    assert q.restarts == 1 and q.marks == (("m-1", "dead", 1),) and ("m-1", "dead") in q.deletes


def test_a_template_cannot_mark_its_pods():
    m = mesh(per_host=(("procs", 1),), restartPolicy="RestartProc", maxRestarts=0,
             template={"annotations": {names.RESTART_COUNTED_ANNOTATION: "0"}})
    assert names.RESTART_COUNTED_ANNOTATION not in pod(m, 0)["metadata"]["annotations"]
    p = plan(m, {0: pod(m, 0, phase="Failed")})
    assert p.restart_limit_reached and p.failed == (0,)


@pytest.mark.parametrize("max_restarts", [1, 5])
def test_a_peer_failing_while_the_operator_was_down_is_part_of_the_counted_mesh_restart(
        max_restarts):
    """RestartMesh: the operator marked rank 1's failed pod, wrote the count and was killed
    before its deletes; meanwhile rank 0, its peer gone, failed too. Every pod
    still there belongs to the attempt whose restart is counted (nothing is created until all
    are gone): the restart goes on, neither counted again, refused, nor held in a back-off."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=max_restarts)
    pods = {0: pod(m, 0, phase="Failed", uid="peer"), 1: _marked(m, 1, 1, phase="Failed", uid="dead")}
    loops = {1: crashloops.CrashLoop(1, "dead", 2, 10.0, 1.0)}  # its back-off waited out already
    p = plan(m, pods, restarts=1, last_phases={0: "Running", 1: "Running"}, crash_loops=loops,
             now=100.0)
    assert p.restarts == 1 and not p.restart_limit_reached and not p.failed and not p.marks
    assert not p.backoff and set(p.deletes) == {("m-0", "peer"), ("m-1", "dead")}


def test_a_mesh_restart_for_a_lost_proc_marks_a_peer_and_finishes_after_an_operator_death():
    """RestartMesh, rank 0's pod deleted under its proc (no failed pod left to mark): the restart
    marks the pod of a peer it deletes (deleted last). An operator killed before its deletes
    finds that peer still running, marked with a count status.restarts includes, and deletes it
    without counting again; unmarked, it had created rank 0 beside the earlier attempt's rank 1."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    p = plan(m, {1: pod(m, 1, uid="old")}, last_phases={0: "Running", 1: "Running"})
    assert p.restarts == 1 and p.lost_procs == (0,) and p.marks == (("m-1", "old", 1),)
    assert p.deletes == (("m-1", "old"),)
    # Written (rank 1's entry Terminating, rank 0's none), then killed before the delete.
    again = plan(m, {1: _marked(m, 1, 1, uid="old")}, restarts=1, last_phases={1: "Terminating"})
    assert again.restarts == 1 and not again.creates and again.deletes == (("m-1", "old"),)
    assert not again.marks and again.restarted == ("m",)


def test_while_a_mesh_restarts_pods_its_marked_pods_terminate_without_another_restart():
    """RestartMesh: once the restart's deletes are made, its pods (one marked) terminate; the
    plans meanwhile restart nothing again (no ProcFailed event, no restarts metric) and create
    nothing until they are gone."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    pods = {0: pod(m, 0, terminating=True),
            1: _marked(m, 1, 1, phase="Failed", uid="dead", terminating=True)}
    p = plan(m, pods, restarts=1, last_phases={0: "Terminating", 1: "Terminating"})
    assert p.restarts == 1 and not p.restarted and not p.deletes and not p.creates
