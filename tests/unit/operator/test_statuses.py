"""compute_status: counts, conditions (all four, with observedGeneration), phase, procs[].

Aspects: progress then Ready; transition times kept; refusals; restart limit; suspend; errors;
procs[] entries (address, node, gpu); no write when nothing changed.
"""

from mesh_client._src import contract
from procmesh_operator import placing, planning, rendering, statuses

from .builders import SETTINGS, mesh, pod

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def conds(status):
    return {c["type"]: c for c in status["conditions"]}


def test_all_conditions_present_with_generation():
    m = mesh(generation=7)
    s = statuses.compute_status(m, None, {}, planning.Plan(), now=T0)
    assert set(conds(s)) == {"Ready", "Progressing", "Degraded", "GPUBudgetSatisfied", "Scheduled"}
    assert all(c["observedGeneration"] == 7 for c in s["conditions"])
    assert s["observedGeneration"] == 7 and s["phase"] == "Progressing"
    assert conds(s)["Progressing"]["reason"] == statuses.CREATING_PROCS
    assert conds(s)["GPUBudgetSatisfied"]["reason"] == statuses.NO_GPUS


def test_ready_and_transition_times():
    m = mesh()
    starting = statuses.compute_status(m, None, {0: pod(m, 0, ready=False)}, planning.Plan(),
                                       now=T0)
    ready = statuses.compute_status(m, starting, {0: pod(m, 0), 1: pod(m, 1)}, planning.Plan(),
                                    now=T1)
    c = conds(ready)
    assert ready["readyProcs"] == ready["desiredProcs"] == 2 and ready["phase"] == "Ready"
    assert c["Ready"]["status"] == "True" and c["Ready"]["lastTransitionTime"] == T1
    assert c["Degraded"]["lastTransitionTime"] == T0  # unchanged status keeps its time
    assert c["Progressing"]["status"] == "False"
    assert not statuses.differs(ready, statuses.compute_status(
        m, ready, {0: pod(m, 0), 1: pod(m, 1)}, planning.Plan(), now="2027-01-01T00:00:00Z"))


def test_procs_entries():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]}, port=26601)
    pods = {1: pod(m, 1, node="n4", ip="127.0.3.4",
                   placement=rendering.ProcPlacement("n4", "1"))}
    s = statuses.compute_status(m, None, pods, planning.Plan(), now=T0)
    assert s["procs"][0] == {"rank": 0, "coords": {"hosts": 0, "gpus": 0}, "pod": "m-0",
                             "ready": False}
    assert s["procs"][1] == {"rank": 1, "coords": {"hosts": 0, "gpus": 1}, "pod": "m-1",
                             "node": "n4", "address": "127.0.3.4:26601", "ready": True,
                             "podUID": "pod-uid-m-1", "podPhase": "Running", "gpu": "1"}


def test_budget_refusal():
    refusal = placing.Refusal(contract.BUDGET_EXCEEDED, "too much on GPU 0")
    s = statuses.compute_status(mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]}), None, {},
                                planning.Plan(refusal=refusal), now=T0)
    c = conds(s)
    assert c["GPUBudgetSatisfied"]["status"] == "False"
    assert c["GPUBudgetSatisfied"]["reason"] == "GPUBudgetExceeded"
    assert c["Ready"]["reason"] == "GPUBudgetExceeded" and c["Progressing"]["status"] == "False"
    # kubectl get's SCHEDULED column: why no pod is there, not a scheduler wait that is not
    assert (c["Scheduled"]["status"], c["Scheduled"]["reason"]) == ("False", "GPUBudgetExceeded")
    assert c["Scheduled"]["message"] == \
        "0 of 2 procs on nodes; no pod is created for the others: too much on GPU 0"
    assert s["phase"] == "Failed"


def test_colocation_refusal_leaves_budget_unknown():
    refusal = placing.Refusal(contract.INVALID_COLOCATION, "no such mesh")
    c = conds(statuses.compute_status(mesh(), None, {}, planning.Plan(refusal=refusal), now=T0))
    assert c["GPUBudgetSatisfied"]["status"] == "Unknown"
    assert c["Ready"]["reason"] == "InvalidColocation"


def test_restart_limit_and_restarts_count():
    m = mesh(maxRestarts=2)
    p = planning.Plan(restarts=2, failed=(1,), restart_limit_reached=True)
    s = statuses.compute_status(m, None, {0: pod(m, 0), 1: pod(m, 1, phase="Failed")}, p,
                                now=T0)
    c = conds(s)
    assert s["restarts"] == 2 and c["Degraded"]["reason"] == "RestartLimitReached"
    assert c["Progressing"]["status"] == "False" and s["phase"] == "Failed"
    # The advice is true to the planner: a suspend and resume starts every proc again, but
    # the restarts used stay used (only raising maxRestarts restarts later failures).
    assert "raise maxRestarts to restart them" in c["Degraded"]["message"]
    assert "status.restarts stays" in c["Degraded"]["message"]
    # Ready says it too: kubectl get pm's REASON column (Ready's reason) said ProcsNotReady.
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "RestartLimitReached")
    assert c["Ready"]["message"].startswith("1 of 2 procs ready; proc 1") and "failed for good" in c["Ready"]["message"]
    never = mesh(restartPolicy="Never")
    failed = conds(statuses.compute_status(never, None, {0: pod(never, 0), 1: pod(never, 1, phase="Failed")},
                                           planning.Plan(failed=(1,)), now=T0))
    assert (failed["Ready"]["reason"], failed["Degraded"]["reason"]) == ("ProcFailed", "ProcFailed")
    suspended = mesh(maxRestarts=2, suspend=True)
    assert planning.plan(suspended, restarts=2, pods={0: pod(suspended, 0)}, settings=SETTINGS).restarts == 2


def test_restarting_is_progressing():
    m = mesh()
    s = statuses.compute_status(m, None, {0: pod(m, 0)},
                                planning.Plan(restarts=1, restarted=("m-1",)), now=T0)
    assert conds(s)["Progressing"]["reason"] == "Restarting" and s["restarts"] == 1


def test_suspended():
    s = statuses.compute_status(mesh(suspend=True), None, {}, planning.Plan(), now=T0)
    assert s["phase"] == "Suspended" and s["desiredProcs"] == 0 and s["procs"] == []
    assert conds(s)["Ready"]["reason"] == "Suspended"


def test_reconcile_error_is_degraded_and_keeps_restarts():
    s = statuses.compute_status(mesh(), {"restarts": 4}, {}, None, "500 boom", now=T0)
    assert conds(s)["Degraded"]["reason"] == "ReconcileError" and s["restarts"] == 4


def test_gpu_comes_from_the_placement_never_from_the_proc():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]})
    p = pod(m, 0, placement=rendering.ProcPlacement("n1", "1"))
    s = statuses.compute_status(m, None, {0: p}, planning.Plan(), now=T0)
    assert s["procs"][0]["gpu"] == "1"
    plugin = mesh("p", gpus={"mode": "plugin"})
    s = statuses.compute_status(plugin, None, {0: pod(plugin, 0)}, planning.Plan(), now=T0)
    assert "gpu" not in s["procs"][0]  # the device plugin's choice is not in the pod object


def test_a_container_that_cannot_start_names_the_kubelets_reason():
    m = mesh()
    stuck = pod(m, 1, phase="Pending", ready=False, ip=None)
    stuck["status"]["containerStatuses"] = [{"name": "proc-server", "ready": False, "state": {
        "waiting": {"reason": "ErrImageNeverPull", "message": 'image "x:0" is not present'}}}]
    status = statuses.compute_status(m, None, {0: pod(m, 0), 1: stuck}, planning.Plan())
    ready = conds(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ErrImageNeverPull")
    assert "m-1" in ready["message"] and 'image "x:0" is not present' in ready["message"]
    assert "ErrImageNeverPull" in contract.FATAL_REASONS  # so attach stops at once on it


def test_the_schedulers_reason_for_pending_procs_is_readys():
    m = mesh()
    pending = pod(m, 1, phase="Pending", ready=False)
    pending["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable",
                                        "message": "0/2 nodes are available: 2 node(s) didn't "
                                                   "match Pod's node affinity/selector."}]
    s = statuses.compute_status(m, None, {0: pod(m, 0), 1: pending}, planning.Plan(), now=T0)
    ready = conds(s)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Unschedulable")
    assert ready["message"] == ("1 of 2 procs ready; pod m-1 (rank=1) is Pending: 0/2 nodes are "
                                "available: 2 node(s) didn't match Pod's node affinity/selector.")


def test_a_proc_kept_failed_with_its_pod_deleted_stays_so_when_a_reconcile_fails_early():
    """podPhase Deleted is what keeps a lost proc failed (planning.lost_ranks): a reconcile that
    failed before planning must not write it away, or the next one recreates the proc."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="Never")
    pods = {0: pod(m, 0)}
    kept = planning.Plan(failed=(1,), deleted=(1,), lost_procs=(1,))
    written = statuses.compute_status(m, None, pods, kept)
    assert written["procs"][1]["podPhase"] == "Deleted"
    failed_early = statuses.compute_status(m, written, pods, None, "500: boom")
    assert failed_early["procs"][1]["podPhase"] == "Deleted"


def test_a_refusal_that_clears_by_itself_is_waiting_not_failed():
    """WaitingForGPUBudget, WaitingForNode and a colocateWith mesh not yet created clear without a
    change to the mesh: Progressing stays True (the operator keeps trying) with the reason, and
    the phase is Waiting; a refusal that stays is Progressing False and Failed."""
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 1]})
    for reason in (contract.WAITING_FOR_GPU_BUDGET, contract.WAITING_FOR_NODE):
        s = statuses.compute_status(m, None, {}, planning.Plan(
            refusal=placing.Refusal(reason, "no room now")), now=T0)
        assert s["phase"] == statuses.PHASE_WAITING
        assert conds(s)["Progressing"]["status"] == "True"
        assert conds(s)["Progressing"]["reason"] == conds(s)["Ready"]["reason"] == reason
        assert conds(s)["GPUBudgetSatisfied"]["status"] == "False"
    s = statuses.compute_status(m, None, {}, planning.Plan(
        refusal=placing.Refusal(contract.BUDGET_EXCEEDED, "its own procs overflow")), now=T0)
    assert s["phase"] == statuses.PHASE_FAILED and conds(s)["Progressing"]["status"] == "False"
    trainer = mesh("trainer", colocateWith="policy")  # the partner does not exist yet
    s = statuses.compute_status(trainer, None, {}, planning.plan(trainer, restarts=0, pods={},
                                                                settings=SETTINGS), now=T0)
    assert conds(s)["Ready"]["reason"] == contract.WAITING_FOR_COLOCATED
    assert s["phase"] == "Waiting"
    # The partner exists and its procs are not scheduled yet: the same wait.
    s = statuses.compute_status(trainer, None, {}, planning.plan(
        trainer, restarts=0, pods={}, partner=mesh("policy"), settings=SETTINGS), now=T0)
    assert conds(s)["Progressing"]["reason"] == contract.WAITING_FOR_COLOCATED
    assert s["phase"] == "Waiting"
    cycle = mesh("a", colocateWith="b")
    s = statuses.compute_status(cycle, None, {}, planning.plan(
        cycle, restarts=0, pods={}, partner=mesh("b", colocateWith="a"), settings=SETTINGS),
        now=T0)
    assert conds(s)["Ready"]["reason"] == contract.INVALID_COLOCATION and s["phase"] == "Failed"
    longer = planning.plan(cycle, restarts=0, pods={}, partner=mesh("b", colocateWith="c"),
                           settings=SETTINGS, colocation_chain=["c", "a"])
    s = statuses.compute_status(cycle, None, {}, longer, now=T0)
    assert conds(s)["Ready"]["reason"] == contract.INVALID_COLOCATION and s["phase"] == "Failed"


def test_rank_and_pod_lists_read_as_text():
    m = mesh(hosts=2)
    s = statuses.compute_status(m, None, {}, planning.Plan(foreign=("m-0", "m-1")), now=T0)
    assert "pods m-0, m-1 belong to an earlier ProcMesh" in conds(s)["Progressing"]["message"]
    lost = planning.Plan(lost={0: "n1", 1: "n1", 3: "n2"})
    message = statuses.node_lost_message(m, lost)
    assert message.startswith("ranks 0, 1 on node n1; rank 3 on node n2: the node is")
    assert "[" not in message


def test_pods_no_scheduler_looks_at_are_reported_after_a_while_naming_the_scheduler():
    """A template naming a scheduler that does not run (or the kube-scheduler down) leaves the
    pods Pending with no PodScheduled condition and no event: after ``unseen_after`` seconds,
    Ready says so; before, and once a scheduler marked or bound them, it does not."""
    m = mesh(template={"schedulerName": "my-schedulr"})
    pods = {r: pod(m, r, phase="Pending", ready=False, node=None, ip=None) for r in (0, 1)}
    for p in pods.values():
        p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        p["status"]["conditions"] = []
    early = statuses.compute_status(m, None, pods, planning.Plan(), now="2026-01-01T00:01:59Z",
                                    unseen_after=120)
    assert conds(early)["Ready"]["reason"] == statuses.PROCS_NOT_READY
    late = statuses.compute_status(m, None, pods, planning.Plan(), now="2026-01-01T00:02:00Z",
                                   unseen_after=120)
    ready = conds(late)["Ready"]
    assert ready["reason"] == statuses.NOT_SEEN_BY_SCHEDULER
    assert "pod m-0 (rank=0) (and 1 more pods) has waited over 120 s" in ready["message"]
    assert "a scheduler named 'my-schedulr' running?" in ready["message"]
    assert conds(late)["Scheduled"]["reason"] == statuses.NOT_SEEN_BY_SCHEDULER  # describe, attach
    partial = statuses.compute_status(m, None, {0: pods[0]}, planning.Plan(),
                                      now="2026-01-01T00:02:00Z", unseen_after=120)
    assert conds(partial)["Ready"]["reason"] != statuses.NOT_SEEN_BY_SCHEDULER  # a gang held back
    t = statuses.epoch("2026-01-01T00:00:00Z")
    assert statuses.unseen_recheck(pods, t + 100, 120) == 20  # when to look again
    assert statuses.unseen_recheck(pods, t + 130, 120) is None  # reported already
    pods[0]["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": "no fit"}]
    pods[1]["spec"]["nodeName"] = "n1"
    seen = statuses.compute_status(m, None, pods, planning.Plan(), now="2026-01-01T00:05:00Z",
                                   unseen_after=120)
    assert conds(seen)["Ready"]["reason"] == "Unschedulable"  # the scheduler's own word


def _ended(m, rank, exit_code, reason, pod_reason=None, pod_message=None):
    """A failed pod as the kubelet leaves it (the shape of a real evicted proc pod's status)."""
    body = pod(m, rank, phase="Failed", ready=False)
    body["status"]["containerStatuses"] = [{"name": contract.CONTAINER_NAME, "state": {
        "terminated": {"exitCode": exit_code, "reason": reason}}}]
    if pod_reason:
        body["status"] |= {"reason": pod_reason, "message": pod_message}
    return body


def test_a_failed_procs_message_says_how_its_pod_ended():
    """The Degraded message (which attach quotes) says why: OOMKilled, or the kubelet's
    eviction, which the container's own termination (137, Error) does not tell."""
    m = mesh(maxRestarts=0)
    evicted = "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "
    pods = {0: _ended(m, 0, 137, "OOMKilled"),
            1: _ended(m, 1, 137, "Error", "Evicted", evicted)}
    p = planning.Plan(failed=(0, 1), restart_limit_reached=True)
    message = conds(statuses.compute_status(m, None, pods, p, now=T0))["Degraded"]["message"]
    assert message.startswith(
        "procs 0 (exit code 137, OOMKilled), 1 (exit code 137, Error; pod Evicted: Pod ephemeral "
        "local storage usage exceeds the total limit of containers 5Mi.) failed and spec.maxRestarts")
    never = mesh(restartPolicy="Never")
    done = {0: pod(never, 0), 1: _ended(never, 1, 0, "Completed")}
    c = conds(statuses.compute_status(never, None, done, planning.Plan(failed=(1,)), now=T0))
    assert c["Degraded"]["message"].startswith("proc 1 (exit code 0, Completed) failed and restartPolicy is Never")


def test_a_kubelets_stand_in_exit_code_is_not_told_as_the_procs():
    """137 with ContainerStatusUnknown is the kubelet's stand-in for an end it did not see
    (seen in tests/e2e): the message says so, as 137 alone reads as a kill."""
    m = mesh(maxRestarts=0)
    pods = {0: _ended(m, 0, 137, contract.UNKNOWN_END, "Evicted", "The node was low on memory.")}
    message = conds(statuses.compute_status(m, None, pods, planning.Plan(failed=(0,), restart_limit_reached=True),
                                            now=T0))["Degraded"]["message"]
    assert message.startswith(
        "proc 0 (exit code 137, ContainerStatusUnknown, the kubelet's stand-in: it did not see the container "
        "end, so how the proc ended is unknown; pod Evicted: The node was low on memory.) failed")


def test_a_failed_procs_message_tells_a_few_ends():
    m = mesh(hosts=1, perHost=[{"name": "gpus", "size": 5}], maxRestarts=0)
    pods = {r: _ended(m, r, 137, "OOMKilled") for r in range(5)}
    p = planning.Plan(failed=tuple(range(5)), restart_limit_reached=True)
    message = conds(statuses.compute_status(m, None, pods, p, now=T0))["Degraded"]["message"]
    assert message.startswith("procs 0 (exit code 137, OOMKilled), 1 (exit code 137, OOMKilled), "
                              "2 (exit code 137, OOMKilled), 3, 4 failed")
