"""Which transitions become Events (pure), with the failing pod's exit code in the message."""

from mesh_client._src import contract
from procmesh_operator import eventing, names, placing, planning, statuses

from .builders import SETTINGS, mesh, pod

T = "2026-01-01T00:00:00Z"


def test_ready_event_once():
    m = mesh()
    before = statuses.compute_status(m, None, {}, planning.Plan(), now=T)
    after = statuses.compute_status(m, before, {0: pod(m, 0), 1: pod(m, 1)}, planning.Plan(),
                                    now=T)
    events = eventing.transitions(before, after, planning.Plan(), [], {}, "m")
    assert ("Normal", "MeshReady", "2 of 2 procs ready") in events
    assert eventing.transitions(after, after, planning.Plan(), [], {}, "m") == []


def test_refusal_is_one_warning():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]})
    p = planning.Plan(refusal=placing.Refusal(contract.BUDGET_EXCEEDED, "too much"))
    after = statuses.compute_status(m, None, {}, p, now=T)
    events = eventing.transitions(None, after, p, [], {}, "m")
    assert events == [("Warning", "GPUBudgetExceeded", "too much")]


def test_waits_are_one_event_each_a_warning_only_for_a_gpu_budget():
    """A wait (Progressing True) is still news: the colocated mesh that does not exist yet is a
    Normal event (it was a Warning while it read as a refusal); room on a GPU stays a Warning,
    as the scheduler's FailedScheduling is."""
    trainer = mesh("trainer", colocateWith="policy")
    p = planning.plan(trainer, restarts=0, pods={}, settings=SETTINGS)
    after = statuses.compute_status(trainer, None, {}, p, now=T)
    events = eventing.transitions(None, after, p, [], {}, "trainer")
    assert [(kind, reason) for kind, reason, _ in events] == \
        [("Normal", contract.WAITING_FOR_COLOCATED)]
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]})
    p = planning.Plan(refusal=placing.Refusal(contract.WAITING_FOR_GPU_BUDGET, "others' procs"))
    after = statuses.compute_status(m, None, {}, p, now=T)
    assert eventing.transitions(None, after, p, [], {}, "m") == \
        [("Warning", contract.WAITING_FOR_GPU_BUDGET, "others' procs")]


def test_restart_event_carries_exit_code():
    m = mesh()
    failed = pod(m, 1, phase="Failed")
    failed["status"]["containerStatuses"] = [
        {"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]
    p = planning.Plan(restarts=1, restarted=("m-1",))
    status = statuses.compute_status(m, None, {0: pod(m, 0)}, p, now=T)
    events = eventing.transitions(status, status, p, ["m-2"], {1: failed}, "m")
    assert ("Normal", "CreatedProcs", "created 1 pod(s): m-2") in events
    assert any(e[1] == "ProcFailed" and "exit code 137" in e[2] and "restart 1" in e[2]
               for e in events)
    # Evicted by the kubelet: the pod's reason and message say why, the container's 137 does not.
    failed["status"] |= {"reason": "Evicted", "message": "The node was low on resource: memory. "}
    events = eventing.transitions(status, status, p, [], {1: failed}, "m")
    assert ("Warning", "ProcFailed", "proc m-1 failed (exit code 137, Error; pod Evicted: The node was low "
            "on resource: memory.); restarting it (restart 1)") in events


def test_a_queued_mesh_gets_an_event_when_queued_admitted_and_preempted():
    from procmesh_operator import workloads

    m = mesh()
    suspended = mesh(suspend=True)

    def status(admission, previous, spec=suspended):
        base = statuses.compute_status(spec, previous, {}, planning.Plan(), now=T)
        return workloads.overlay(base, previous, admission, "q", 1, T)

    queued = status(workloads.Admission(workloads.STATE_QUEUED, "Pending", "no quota"), None)
    assert [e[:2] for e in eventing.transitions(None, queued, None, [], {}, "m")] == \
        [("Normal", "Queued")]
    admitted = status(workloads.Admission(workloads.STATE_ADMITTED, "Admitted", "", True, "cq"),
                      queued, spec=m)
    assert ("Normal", "Admitted") in [e[:2] for e in eventing.transitions(queued, admitted, None, [], {}, "m")]
    evicted = status(workloads.Admission(workloads.STATE_EVICTED, "Preempted", "by high", True),
                     admitted)
    assert ("Warning", "Preempted") in [e[:2] for e in eventing.transitions(admitted, evicted, None, [], {}, "m")]
    again = status(workloads.Admission(workloads.STATE_QUEUED, "Pending", "no quota"), evicted)
    assert [e for e in eventing.transitions(evicted, again, None, [], {}, "m")
            if e[1] in ("Queued", "Preempted", "Admitted")] == []  # still the same wait
    assert eventing.transitions(queued, queued, None, [], {}, "m") == []


def test_the_gangs_verdict_is_an_event_when_it_changes():
    """That the whole mesh cannot be placed (an admitted Kueue workload holding quota, or any
    gang) was said by no Event; now once per change, and once more when it is placed."""
    from procmesh_operator import ganging

    m = mesh()
    gated = {r: pod(m, r, phase="Pending", ready=False, node=None, ip=None) for r in (0, 1)}
    first = ganging.Hold(ganging.UNSCHEDULABLE, "2 procs must be placed together and only 1 fit")
    held = statuses.compute_status(m, None, gated, planning.Plan(), hold=first, now=T)
    events = eventing.transitions(None, held, planning.Plan(), [], {}, "m")
    assert ("Warning", "Unschedulable", "2 procs must be placed together and only 1 fit") in events
    other = ganging.Hold(ganging.UNSCHEDULABLE, "2 procs must be placed together and only 0 fit")
    still = statuses.compute_status(m, held, gated, planning.Plan(), hold=other, now=T)
    assert [e for e in eventing.transitions(held, still, planning.Plan(), [], {}, "m")
            if e[1] == "Unschedulable"] == []  # the same verdict: no new event
    placed = statuses.compute_status(m, still, {0: pod(m, 0), 1: pod(m, 1)}, planning.Plan(), now=T)
    assert ("Normal", "AllProcsScheduled", "2 of 2 procs on nodes (the gang was Unschedulable)") in \
        eventing.transitions(still, placed, planning.Plan(), [], {}, "m")


def test_a_mesh_restart_finished_for_an_earlier_operator_says_what_it_knows():
    """The restart of a lost proc (its pod gone), counted by an operator killed before its
    deletes: the next run restarts the mesh knowing no failed proc to name, and says so."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    peer = pod(m, 1)
    peer["metadata"]["annotations"][names.RESTART_COUNTED_ANNOTATION] = "1"
    p = planning.plan(m, restarts=1, pods={1: peer}, settings=SETTINGS,
                      last_phases={1: "Terminating"})
    status = statuses.compute_status(m, None, {1: peer}, p, now=T)
    events = eventing.transitions(status, status, p, [], {1: peer}, "m")
    assert ("Warning", "ProcFailed", "proc failed: not known to this run (counted by an operator "
            "that ended before its deletes); restarting the whole mesh (restart 1)") in events
