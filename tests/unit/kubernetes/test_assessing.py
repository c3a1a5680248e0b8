"""Reading a ProcMesh and its pods into ready / waiting / stuck, and the manifest spawn_procs makes."""

import pytest

from mesh_client._src import contract
from mesh_client._src.kubernetes import assessing, manifests


def mesh(conditions=(), procs=(), generation=1, observed=1, **status):
    return {
        "metadata": {"name": "m", "generation": generation},
        "status": {"observedGeneration": observed, "conditions": list(conditions), "procs": list(procs), **status},
    }


def cond(type_, status, reason, message=""):
    return {"type": type_, "status": status, "reason": reason, "message": message}


READY_PROCS = [{"rank": 0, "address": "10.0.0.1:26600", "ready": True}]


def test_ready_needs_the_current_generation_and_every_address():
    assert assessing.assess(mesh([cond("Ready", "True", "AllProcsReady")], READY_PROCS), None).ready
    assert not assessing.assess(mesh([cond("Ready", "True", "AllProcsReady")], READY_PROCS, generation=2), None).ready
    assert not assessing.assess(mesh([cond("Ready", "True", "AllProcsReady")], [{"rank": 0, "ready": True}]), None).ready


def ready_pod(name, ready=True):
    return {"metadata": {"name": name}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_status_for_an_older_generation_says_no_operator_reconciled_it():
    m = mesh([cond("Ready", "True", "AllProcsReady", "1 of 1 procs ready")], READY_PROCS,
             generation=3, observed=2)
    m["metadata"]["namespace"] = "team-x"
    v = assessing.assess(m, None)
    assert not v.ready and not v.fatal and v.reason == "StatusStale"
    assert v.problem == ("no operator has reconciled generation 3 of this ProcMesh (its status is for "
                         "generation 2): is the operator running, and watching namespace team-x?")
    assert "AllProcsReady" not in v.problem  # never the self-contradicting old verdict


def test_a_ready_status_whose_pods_are_gone_is_not_believed():
    procs = [{"rank": r, "pod": f"m-{r}", "address": f"10.0.0.{r}:1", "ready": True} for r in range(2)]
    m = mesh([cond("Ready", "True", "AllProcsReady")], procs, readyProcs=2, desiredProcs=2)
    assert assessing.assess(m, [ready_pod("m-0"), ready_pod("m-1")]).ready
    v = assessing.assess(m, [ready_pod("m-1", ready=False)])
    assert not v.ready and v.reason == "StatusBehindPods"
    assert "the status says 2 of 2 procs ready, but pod m-0 is gone, m-1 is not ready" in v.problem
    assert assessing.stale_status(m, None) is None  # pods unreadable: the status alone decides


def test_a_refused_budget_is_fatal_with_the_operator_message():
    v = assessing.assess(mesh([cond("GPUBudgetSatisfied", "False", "GPUBudgetExceeded", "device 0 on n1: 1.4 > 1")]), [])
    assert v.fatal and v.reason == "GPUBudgetExceeded" and "device 0 on n1" in v.problem


def test_a_wait_that_clears_by_itself_is_waited_for_with_the_operators_message():
    """The phase says Waiting for these (contract.WAITING_REASONS): the client keeps waiting,
    showing why, where it once stopped at once on the same reasons."""
    for reason in sorted(contract.WAITING_REASONS):
        v = assessing.assess(mesh([cond("Ready", "False", reason, "room on GPU 0 of n1"),
                                   cond("Progressing", "True", reason, "room on GPU 0 of n1"),
                                   cond("GPUBudgetSatisfied", "False", reason, "room"),
                                   cond("Scheduled", "False", "Scheduling", "0 of 1 on nodes")],
                                  desiredProcs=1), [])
        assert not v.ready and not v.fatal and v.reason == reason
        assert v.problem == f"{reason}: room on GPU 0 of n1" and reason in v.progress
    assert not contract.WAITING_REASONS & contract.FATAL_REASONS


def test_an_image_that_cannot_be_pulled_is_fatal():
    pod = {"metadata": {"name": "m-0"}, "status": {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied for x/y"}}}]}}
    v = assessing.assess(mesh([cond("Ready", "False", "ProcsNotReady")]), [pod])
    assert v.fatal and "pod m-0: ImagePullBackOff: pull access denied for x/y" == v.problem


def test_a_missing_token_secret_is_fatal_with_the_operator_message():
    """A proc pod of the mesh waits in ContainerCreating for a token volume that no wait
    brings back (the operator's way out is a suspend and resume): the wait ends at once."""
    stuck = {"metadata": {"name": "m-1"}, "status": {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    gone = "the token Secret m-token-x1y2z was deleted while the mesh has procs: ... resume it"
    v = assessing.assess(mesh([cond("Ready", "False", "TokenSecretMissing", f"1 of 2 procs ready; {gone}"),
                               cond("Degraded", "True", "TokenSecretMissing", gone)]), [stuck])
    assert v.fatal and v.reason == "TokenSecretMissing"
    assert v.problem == f"TokenSecretMissing: {gone}"


def test_unschedulable_pods_keep_waiting_with_the_scheduler_message():
    pod = {"metadata": {"name": "m-0"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes are available"}]}}
    v = assessing.assess(mesh([cond("Ready", "False", "ProcsNotReady")]), [pod, pod])
    assert not v.fatal and v.reason == "Unschedulable"
    assert v.problem == "pod m-0 is Pending: 0/2 nodes are available (and 1 more)"


def test_no_status_means_no_operator():
    v = assessing.assess({"metadata": {"name": "m", "generation": 1}}, [])
    assert "operator" in v.problem and not v.fatal and v.reason == "NotReconciled"


def test_death_story_from_the_container_status():
    pod = {"spec": {"nodeName": "n1"}, "status": {"containerStatuses": [
        {"restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "Error", "signal": 9}}}]}}
    assert assessing.explain_death(pod, "m-1") == (
        "its container in pod m-1 on node n1 terminated (exit code 137, signal 9, Error); restarts: 0"
    )
    assert assessing.explain_death(None, "m-1") == "pod m-1 was deleted"


def test_manifest_modes():
    pinned = manifests.proc_mesh_manifest("p", hosts=1, per_host={"gpus": 2}, gpus=[0, 1], memory_fraction=0.3)
    assert pinned["spec"]["gpus"] == {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.3}
    assert pinned["spec"]["perHost"] == [{"name": "gpus", "size": 2}]
    plugin = manifests.proc_mesh_manifest("q", hosts=2, per_host={"gpus": 1}, gpus="plugin", colocate_with="p")
    assert plugin["spec"]["gpus"] == {"mode": "plugin"} and plugin["spec"]["colocateWith"] == "p"
    with pytest.raises(ValueError, match="'hosts' dimension"):
        manifests.proc_mesh_manifest("r", hosts=1, per_host={"hosts": 2})
    with pytest.raises(ValueError, match="gpus=3"):
        manifests.gpus_spec(3, None)


def test_a_mesh_waiting_as_one_gang_reports_the_operators_reason_not_a_pods():
    gated = {"metadata": {"name": "m-0"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
         "message": "Scheduling is blocked due to non-empty scheduling gates"}]}}
    v = assessing.assess(mesh([cond("Ready", "False", "Unschedulable", "12 procs ..."),
                               cond("Scheduled", "False", "Unschedulable",
                                    "12 procs must be placed together and only 6 fit")]), [gated])
    assert not v.ready and not v.fatal and v.reason == "Unschedulable"
    assert v.problem == "Unschedulable: 12 procs must be placed together and only 6 fit"


def test_spawned_meshes_carry_their_lease_and_their_creators_pod():
    from mesh_client._src.kubernetes import lifetimes

    env = {"POD_NAME": "controller-x", "POD_UID": "uid-1"}
    owner = lifetimes.creator_pod_owner("team", env, pod_namespace="team")
    assert owner == {"apiVersion": "v1", "kind": "Pod", "name": "controller-x", "uid": "uid-1"}
    assert lifetimes.creator_pod_owner("other", env, pod_namespace="team") is None  # refs stay in a namespace
    assert lifetimes.creator_pod_owner("team", {}, pod_namespace="team") is None  # not told who it is
    body = manifests.proc_mesh_manifest("m", hosts=1, per_host={"procs": 1}, lease_seconds=30, owner=owner)
    assert body["spec"]["lease"] == {"durationSeconds": 30}
    assert body["metadata"]["ownerReferences"] == [owner]
    plain = manifests.proc_mesh_manifest("m", hosts=1, per_host={"procs": 1})
    assert "lease" not in plain["spec"] and "ownerReferences" not in plain["metadata"]


def test_the_progress_line_ends_before_whatever_follows(capsys):
    from mesh_client._src.kubernetes.attaching import ProgressLine

    line = ProgressLine(show=True)
    line.update("ProcMesh ns/m: 0/8 procs ready")
    line.end()  # as on an error or Ctrl-C: a newline, so the traceback starts on its own line
    line.end()  # idempotent
    assert capsys.readouterr().err == "\rProcMesh ns/m: 0/8 procs ready\n"
    quiet = ProgressLine(show=False)
    quiet.update("x")
    quiet.end()
    assert capsys.readouterr().err == ""


def test_death_story_of_an_evicted_pod_gives_the_kubelets_reason():
    # A real evicted proc pod's status: the container says only 137/Error, the pod says why.
    pod = {"spec": {"nodeName": "n1"}, "status": {
        "phase": "Failed", "reason": "Evicted",
        "message": "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. ",
        "containerStatuses": [{"restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}}
    assert assessing.explain_death(pod, "m-1") == (
        "its container in pod m-1 on node n1 terminated (exit code 137, Error); pod Evicted: Pod ephemeral "
        "local storage usage exceeds the total limit of containers 5Mi.; restarts: 0")
