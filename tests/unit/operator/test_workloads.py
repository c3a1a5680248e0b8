"""A queued mesh's Kueue Workload (workloads.py) and the status it gives the mesh.

Aspects: the queue label; the Workload (one pod set of every proc, requests and placement of a
proc pod, priority, owned by the mesh); its update after a template edit; reading admitted / queued / evicted; the release patch
after an eviction (as Kueue's jobframework writes it); the PodsReady condition kept as jobframework
keeps it (Kueue's waitForPodsReady reads it); the Admitted condition and the overlay
of Ready, Scheduled and Progressing while the mesh is not admitted.
"""

import asyncio

import pytest

from mesh_client._src import contract
from mesh_client._src.kubernetes import assessing
from procmesh_operator import admitting, kubeclient, rendering, statuses, workloads

from .builders import SETTINGS, mesh, mesh_body

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:01:00Z"


def cond(type_, status, reason, message=""):
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": NOW, "observedGeneration": 1}


def workload(*conditions, admission=None, rv="7"):
    status = {"conditions": list(conditions)}
    if admission is not None:
        status["admission"] = admission
    return {"metadata": {"name": "w", "generation": 1, "resourceVersion": rv}, "status": status}


def test_the_queue_label_on_the_mesh_makes_it_queueable():
    body = mesh_body("m")
    assert workloads.queue_name(body) is None
    body["metadata"]["labels"] = {workloads.QUEUE_NAME_LABEL: "team-a"}
    assert workloads.queue_name(body) == "team-a"


def test_the_workload_is_one_pod_set_of_every_proc_owned_by_the_mesh():
    template = {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "priorityClassName": "high", "nodeSelector": {"pool": "a"},
                "env": [{"name": "X", "value": "1"}]}
    m = mesh("m", hosts=2, per_host=(("gpus", 3),), gpus={"mode": "plugin"}, template=template)
    pod = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
    w = workloads.render_workload(m, "team-a", pod, 1000)
    assert w["apiVersion"] == "kueue.x-k8s.io/v1beta2" and w["kind"] == "Workload"
    assert w["metadata"]["name"] == "procmesh-m-uid-m"
    assert w["metadata"]["labels"][contract.MESH_LABEL] == "m"
    assert w["metadata"]["ownerReferences"][0]["uid"] == m.uid
    assert w["spec"]["queueName"] == "team-a"
    assert w["spec"]["active"] is True
    suspended = mesh("m", suspend=True)
    assert workloads.render_workload(suspended, "q", pod, None)["spec"]["active"] is False
    assert w["spec"]["priority"] == 1000
    assert w["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                             "name": "high"}
    (pod_set,) = w["spec"]["podSets"]
    assert pod_set["name"] == "procs" and pod_set["count"] == 6
    spec = pod_set["template"]["spec"]
    (container,) = spec["containers"]
    # What Kueue counts (requests, the GPU unit of plugin mode) and what picks a node; no env.
    assert container["resources"]["requests"]["cpu"] == "100m"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 1  # defaulted, as in a pod
    assert "env" not in container
    assert spec["nodeSelector"] == {"pool": "a"} and spec["priorityClassName"] == "high"


def test_a_mesh_without_priority_class_has_no_priority():
    m = mesh("m")
    pod = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
    spec = workloads.render_workload(m, "q", pod, None)["spec"]
    assert "priority" not in spec and "priorityClassRef" not in spec


def test_a_template_edit_that_changes_the_demand_gives_a_patch_of_the_new_pod_sets():
    def rendered(**template):
        m = mesh("m", per_host=(("gpus", 2),), gpus={"mode": "plugin"}, template=template)
        pod = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
        return m, pod, workloads.render_workload(m, "q", pod, 7 if "priorityClassName" in template else None)

    m, pod, before = rendered(resources={"requests": {"cpu": "10m"}})
    digest = workloads.demand_digest(m, pod)
    assert not workloads.demand_changed(before, digest)
    assert workloads.demand_changed({"metadata": {}}, digest)  # written by an older operator
    same = rendered(resources={"requests": {"cpu": "10m"}}, env=[{"name": "X", "value": "1"}])
    assert workloads.demand_digest(same[0], same[1]) == digest  # env is no demand
    m2, pod2, after = rendered(resources={"requests": {"cpu": "6"}}, priorityClassName="high")
    assert workloads.demand_changed(before, workloads.demand_digest(m2, pod2))
    stored = dict(before, metadata=dict(before["metadata"], resourceVersion="9"))
    patch = workloads.demand_patch(stored, after)
    assert patch["metadata"]["resourceVersion"] == "9"  # Kueue reserving meanwhile wins
    assert patch["metadata"]["annotations"] == after["metadata"]["annotations"]
    (pod_set,) = patch["spec"]["podSets"]
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "6"
    assert patch["spec"]["priority"] == 7 and patch["spec"]["priorityClassRef"]["name"] == "high"
    back = workloads.demand_patch(after, before)["spec"]  # the class removed: merge-patch nulls
    assert back["priority"] is None and back["priorityClassRef"] is None


def test_reading_admitted_queued_and_evicted():
    assert workloads.read(None).state == workloads.STATE_QUEUED
    assert workloads.read(workload()).state == workloads.STATE_QUEUED
    pending = workloads.read(workload(cond("QuotaReserved", "False", "Pending",
                                           "couldn't assign flavors to pod set procs: insufficient "
                                           "quota for nvidia.com/gpu")))
    assert (pending.state, pending.reason) == (workloads.STATE_QUEUED, "Pending")
    assert "insufficient quota" in pending.message and not pending.reserved
    admitted = workloads.read(workload(cond("QuotaReserved", "True", "QuotaReserved"),
                                       cond("Admitted", "True", "Admitted"),
                                       admission={"clusterQueue": "cq"}))
    assert (admitted.state, admitted.cluster_queue) == (workloads.STATE_ADMITTED, "cq")
    checks = workloads.read(workload(cond("QuotaReserved", "True", "QuotaReserved"),
                                     cond("Admitted", "False", "UnsatisfiedChecks")))
    assert (checks.state, checks.reason) == (workloads.STATE_QUEUED, "UnsatisfiedChecks")
    evicted = workloads.read(workload(cond("QuotaReserved", "True", "QuotaReserved"),
                                      cond("Admitted", "True", "Admitted"),
                                      cond("Evicted", "True", "Preempted", "Preempted to "
                                           "accommodate a workload (UID: u)")))
    assert (evicted.state, evicted.reason, evicted.reserved) == \
        (workloads.STATE_EVICTED, "Preempted", True)
    # Released (by release_patch): queued again, and it says what evicted it.
    requeued = workloads.read(workload(cond("QuotaReserved", "False", "Pending",
                                            "couldn't assign flavors to pod set procs"),
                                       cond("Evicted", "True", "Preempted", "Preempted to "
                                            "accommodate a workload (UID: u)")))
    assert (requeued.state, requeued.reason) == (workloads.STATE_QUEUED, "Pending")
    assert "evicted before: Preempted: Preempted to accommodate" in requeued.message
    inactive = workload(cond("Evicted", "True", "Deactivated", "The workload is deactivated"))
    inactive["spec"] = {"active": False}
    assert workloads.read(inactive).reason == "Deactivated"


def test_a_workload_kueue_deactivated_itself_is_left_inactive_and_says_how_to_activate_it():
    """waitForPodsReady's requeuing limit: the operator, which keeps a Workload active while
    spec.suspend is false, activated it again, and the limit never took effect."""
    target = workload(cond("DeactivationTarget", "True", "RequeuingLimitExceeded",
                           "exceeding the maximum number of re-queuing retries"))
    assert workloads.deactivated_by_kueue(target)
    gone = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is "
                         "deactivated due to exceeding the maximum number of re-queuing retries"))
    gone["spec"] = {"active": False}
    gone["metadata"] |= {"name": "procmesh-big-12345678", "namespace": "ns"}
    assert workloads.deactivated_by_kueue(gone)
    said = workloads.read(gone)
    assert (said.state, said.reason) == (workloads.STATE_QUEUED, "DeactivatedDueToRequeuingLimitExceeded")
    assert said.message == (
        "Kueue deactivated the mesh's Workload: The workload is deactivated due to exceeding the maximum "
        "number of re-queuing retries; it is not queued again until it is active: kubectl patch "
        "workloads.kueue.x-k8s.io procmesh-big-12345678 -n ns --type merge -p '{\"spec\":{\"active\":true}}'")
    # The operator's own deactivation (spec.suspend) is no such decision.
    suspended = workload(cond("Evicted", "True", "Deactivated", "The workload is deactivated"))
    assert not workloads.deactivated_by_kueue(suspended)


def test_a_workload_the_operator_deactivated_last_is_its_own_whatever_kueues_conditions_say():
    """Kueue keeps the Evicted condition of its deactivation until it admits the Workload
    again, also once a user has activated it: a mesh suspended, then resumed before that, read
    as deactivated by Kueue, and its Workload stayed inactive, the mesh saying so."""
    stale = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is "
                          "deactivated due to exceeding the maximum number of re-queuing retries"),
                     cond("Requeued", "True", "Reactivated", "The workload was reactivated"))
    stale["spec"] = {"active": True}  # the user's activation
    suspended = {**stale, **workloads.active_patch(False)}  # then the mesh's suspend
    assert suspended["metadata"]["annotations"] == {workloads.SUSPENDED_ANNOTATION: "true"}
    assert not workloads.deactivated_by_kueue(suspended)
    assert workloads.read(suspended).reason == "Deactivated"  # spec.suspend, not Kueue
    # The resume takes the mark off (a merge patch's None): a later deactivation is Kueue's.
    assert workloads.active_patch(True) == {
        "metadata": {"annotations": {workloads.SUSPENDED_ANNOTATION: None}}, "spec": {"active": True}}
    kueues = {**stale, "spec": {"active": False}}
    assert workloads.deactivated_by_kueue(kueues)


def managed(manager, *spec_fields, operation="Update"):
    """A managedFields entry as the API server writes it for an update or patch by ``manager``
    (``operation`` "Apply": a server-side apply)."""
    return {"manager": manager, "operation": operation, "apiVersion": "kueue.x-k8s.io/v1beta2",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {f"f:{f}": {} for f in spec_fields}}}


def test_a_workload_an_older_operator_deactivated_for_a_suspend_is_its_own():
    """An operator before the mark deactivated for spec.suspend with ``spec.active: false`` alone,
    and Kueue's Evicted condition of an earlier deactivation of its own stayed: on resume the
    Workload read as Kueue's and stayed inactive. The API server keeps who set spec.active."""
    stale = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is "
                          "deactivated due to exceeding the maximum number of re-queuing retries"),
                     cond("Requeued", "False", "DeactivatedDueToRequeuingLimitExceeded", "..."))
    old_suspend = {**stale, "spec": {"active": False}}
    old_suspend["metadata"] = {"managedFields": [managed("procmesh-operator", "podSets", "queueName"),
                                                 managed("procmesh-operator", "active")]}
    assert workloads.active_set_by_operator(old_suspend)
    assert not workloads.deactivated_by_kueue(old_suspend)
    assert workloads.read(old_suspend).reason == "Deactivated"  # spec.suspend, not Kueue
    # Kueue's own deactivation: its update changed spec.active, which the API server then gives
    # to Kueue's manager alone, named after its User-Agent (kueue/v0.17.0 ...; the operator keeps
    # the fields it set that Kueue left alone).
    by_kueue = {**stale, "spec": {"active": False}}
    by_kueue["metadata"] = {"managedFields": [managed("procmesh-operator", "podSets", "queueName"),
                                              managed("kueue", "active")]}
    assert not workloads.active_set_by_operator(by_kueue)
    assert workloads.deactivated_by_kueue(by_kueue)
    # Shared (a server-side apply of the same value), or not known (managedFields stripped):
    # Kueue's conditions decide, as before.
    shared = {**by_kueue, "metadata": {"managedFields": [managed("procmesh-operator", "active"),
                                                         managed("kubectl", "active", operation="Apply")]}}
    assert workloads.deactivated_by_kueue(shared)
    assert workloads.deactivated_by_kueue({**by_kueue, "metadata": {}})


def test_the_release_clears_the_admission_and_requeues_after_preemption():
    w = workload(cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted"),
                 cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
                 admission={"clusterQueue": "cq"}, rv="42")
    patch = workloads.release_patch(w, LATER)
    assert patch["metadata"] == {"resourceVersion": "42"}  # optimistic: Kueue's writes win
    assert patch["status"]["admission"] is None
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert by_type["QuotaReserved"]["status"] == "False"
    assert by_type["QuotaReserved"]["reason"] == "Pending"
    assert by_type["QuotaReserved"]["lastTransitionTime"] == LATER
    assert by_type["Admitted"]["status"] == "False"
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert by_type["Evicted"] == w["status"]["conditions"][2]  # Kueue resets it on re-admission
    deactivated = workload(cond("Evicted", "True", "Deactivated", "The workload is deactivated"))
    by_type = {c["type"]: c for c in workloads.release_patch(deactivated, LATER)["status"]["conditions"]}
    assert by_type["Requeued"]["status"] == "False"
    # Kueue's own deactivation: the base reason, the only one after which Kueue (v0.17) makes
    # an activated Workload Requeued=True again (with the derived one it was never admitted).
    by_kueue = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded",
                             "The workload is deactivated due to exceeding the maximum number of "
                             "re-queuing retries"))
    by_type = {c["type"]: c for c in workloads.release_patch(by_kueue, LATER)["status"]["conditions"]}
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("False", "Deactivated")
    assert by_type["Requeued"]["message"].endswith("maximum number of re-queuing retries")


def test_pods_ready_as_kueues_job_controllers_keep_it():
    """Without PodsReady, Kueue's waitForPodsReady evicted every admitted mesh at its timeout,
    Ready or not; jobframework's generatePodsReadyCondition is the model."""
    def after(conditions, admitted, ready, size=4):
        return workloads.pods_ready(conditions, admitted, ready, size)

    # Queued or admitted and not all ready yet: WaitForStart, which no condition already says.
    assert after([], False, 0) is None
    assert after([], True, 3) is None
    assert after([cond("PodsReady", "False", "WaitForStart")], True, 3) is None
    # Every proc ready: Started; then one lost: WaitForRecovery until all are back (Recovered).
    started = after([], True, 4)
    assert started == ("True", "Started", "all 4 procs ready")
    assert after([cond("PodsReady", *started[:2])], True, 4) is None
    assert after([cond("PodsReady", *started[:2])], True, 3)[:2] == ("False", "WaitForRecovery")
    assert after([cond("PodsReady", "False", "WaitForRecovery")], True, 2) is None
    assert after([cond("PodsReady", "False", "WaitForRecovery")], True, 4)[:2] == ("True", "Recovered")
    # Evicted and requeued (not admitted): waits for its start again, so the timeout applies anew.
    assert after([cond("PodsReady", "True", "Started")], False, 0)[:2] == ("False", "WaitForStart")


def test_the_pods_ready_patch_sets_that_condition_only_and_is_optimistic():
    w = workload(cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted"),
                 admission={"clusterQueue": "cq"}, rv="9")
    patch = workloads.pods_ready_patch(w, ("True", "Started", "all 4 procs ready"), LATER)
    assert patch["metadata"] == {"resourceVersion": "9"}
    assert patch["status"]["conditions"][:2] == w["status"]["conditions"]
    assert {k: patch["status"]["conditions"][2][k] for k in ("type", "status", "reason", "lastTransitionTime")} == \
        {"type": "PodsReady", "status": "True", "reason": "Started", "lastTransitionTime": LATER}
    # An eviction's release sets it back to WaitForStart, before Kueue can admit the mesh again.
    evicted = workload(cond("QuotaReserved", "True", "QuotaReserved"), cond("PodsReady", "True", "Started"),
                       cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout"))
    by_type = {c["type"]: c for c in workloads.release_patch(evicted, LATER)["status"]["conditions"]}
    assert (by_type["PodsReady"]["status"], by_type["PodsReady"]["reason"]) == ("False", "WaitForStart")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("False", "PodsReadyTimeout")


def _queued_status(admission, queue="team-a", previous=None):
    m = mesh("m", suspend=True)  # how reconciling plans a mesh that is not admitted
    status = statuses.compute_status(m, previous, {}, None, now=NOW)
    return workloads.overlay(status, previous, admission, queue, m.generation, NOW)


def test_a_queued_mesh_says_quota_reserved_false_with_kueues_message():
    admission = workloads.Admission(workloads.STATE_QUEUED, "Pending",
                                    "couldn't assign flavors to pod set procs: insufficient quota "
                                    "for nvidia.com/gpu in flavor default, 4 more needed")
    status = _queued_status(admission)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type[contract.ADMITTED]["status"] == "False"
    assert by_type[contract.ADMITTED]["reason"] == "Pending"
    assert by_type[contract.ADMITTED]["message"].startswith("QuotaReserved=False (Pending): "
                                                             "couldn't assign flavors")
    for type_ in (contract.READY, contract.SCHEDULED):
        assert (by_type[type_]["status"], by_type[type_]["reason"]) == ("False", contract.QUEUED)
        assert "4 more needed" in by_type[type_]["message"]
        assert "LocalQueue team-a" in by_type[type_]["message"]
    assert by_type[contract.PROGRESSING]["status"] == "True"
    assert status["phase"] == workloads.PHASE_QUEUED and status["procs"] == []
    # attach's wait reads the Scheduled reason; a failed call's explanation reads Admitted.
    body = {"metadata": {"generation": 1}, "status": status}
    verdict = assessing.assess(body, [])
    assert verdict.reason == contract.QUEUED and "QuotaReserved=False" in verdict.problem
    assert not verdict.fatal  # a queued mesh may be admitted: attach keeps waiting
    assert "Pending" in (assessing.queue_story(body) or "")


def test_a_queued_meshs_status_settles_its_transition_times_kept():
    admission = workloads.Admission(workloads.STATE_QUEUED, "Pending", "no quota")
    m = mesh("m", suspend=True)
    first = _queued_status(admission)
    again = workloads.overlay(statuses.compute_status(m, first, {}, None, now=LATER), first,
                              admission, "team-a", m.generation, LATER)
    assert not statuses.differs(first, again)  # no status write per reconcile of a queued mesh
    assert all(c["lastTransitionTime"] == NOW for c in again["conditions"])


def test_an_evicted_mesh_says_kueues_reason_and_that_it_comes_back():
    admission = workloads.Admission(workloads.STATE_EVICTED, "Preempted",
                                    "Preempted to accommodate a workload (UID: u) due to "
                                    "prioritization in the ClusterQueue", reserved=True)
    status = _queued_status(admission)
    by_type = {c["type"]: c for c in status["conditions"]}
    for type_ in (contract.READY, contract.SCHEDULED, contract.ADMITTED):
        assert by_type[type_]["reason"] == "Preempted"
        assert "Evicted=True (Preempted): Preempted to accommodate" in by_type[type_]["message"]
        assert "runs again once Kueue re-admits it" in by_type[type_]["message"]


def test_a_mesh_whose_workload_was_deleted_under_its_procs_says_so_not_evicted():
    status = _queued_status(workloads.deleted("procmesh-m-uid"))
    by_type = {c["type"]: c for c in status["conditions"]}
    for type_ in (contract.READY, contract.SCHEDULED, contract.ADMITTED):
        assert by_type[type_]["reason"] == workloads.WORKLOAD_DELETED
        message = by_type[type_]["message"]
        assert message.startswith("the mesh's Kueue Workload procmesh-m-uid was deleted"), message
        assert "Evicted=True" not in message  # Kueue said nothing: the Workload is gone


def test_an_admitted_mesh_keeps_its_own_conditions_and_the_status_settles():
    admission = workloads.Admission(workloads.STATE_ADMITTED, "Admitted", "", True, "cq")
    m = mesh("m")
    base = statuses.compute_status(m, None, {}, None, now=NOW)
    first = workloads.overlay(base, None, admission, "q", m.generation, NOW)
    by_type = {c["type"]: c for c in first["conditions"]}
    assert by_type[contract.ADMITTED]["status"] == "True"
    assert "ClusterQueue cq" in by_type[contract.ADMITTED]["message"]
    assert by_type[contract.READY] == {c["type"]: c for c in base["conditions"]}[contract.READY]
    assert first["phase"] == base["phase"]
    # Reconciled again later: nothing changed, so nothing to write (the transition time holds).
    again_base = statuses.compute_status(m, first, {}, None, now=LATER)
    again = workloads.overlay(again_base, first, admission, "q", m.generation, LATER)
    assert not statuses.differs(first, again)


def test_a_suspended_mesh_keeps_its_own_reason_and_says_its_workload_is_deactivated():
    admission = workloads.Admission(workloads.STATE_EVICTED, "Deactivated",
                                    "The workload is deactivated", reserved=False)
    m = mesh("m", suspend=True)
    base = statuses.compute_status(m, None, {}, None, now=NOW)
    status = workloads.overlay(base, None, admission, "q", m.generation, NOW, suspended=True)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type[contract.READY]["reason"] == statuses.SUSPENDED
    assert status["phase"] == statuses.PHASE_SUSPENDED
    assert (by_type[contract.ADMITTED]["status"], by_type[contract.ADMITTED]["reason"]) == \
        ("False", "Deactivated")


def test_an_admitted_meshs_pods_get_its_flavors_node_labels_and_tolerations():
    w = {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "procs", "flavors": {"cpu": "default", "nvidia.com/gpu": "h200"}}]}}}
    assert workloads.assigned_flavors(w) == ["default", "h200"]
    assert workloads.assigned_flavors({"status": {}}) == []
    taint = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    flavors = [{"metadata": {"name": "default"}, "spec": {}},
               {"metadata": {"name": "h200"},
                "spec": {"nodeLabels": {"gpu.product": "H200", "zone": "b"}, "tolerations": [taint]}}]
    template = {"nodeSelector": {"zone": "a"}, "image": "x"}
    placed = workloads.with_flavors(template, flavors)
    # Added, never overriding what the template says; the template itself is not changed.
    assert placed["nodeSelector"] == {"zone": "a", "gpu.product": "H200"}
    assert placed["tolerations"] == [taint] and placed["image"] == "x"
    assert template == {"nodeSelector": {"zone": "a"}, "image": "x"}
    assert workloads.with_flavors(placed, flavors)["tolerations"] == [taint]  # no repeats


def test_without_kueue_the_advice_is_what_the_admission_policy_allows():
    """procmesh-queue-name-fixed refuses removing the queue label from a mesh, so the message
    says to install Kueue or to create the mesh again without it."""
    class NoKueue:
        async def get_or_none(self, path):
            return None

        async def create(self, path, body):
            raise kubeclient.ApiError(404, "NotFound", "the server could not find the resource")

    with pytest.raises(admitting.KueueNotServed) as e:
        asyncio.run(admitting.admission(NoKueue(), mesh(), "team-a", {}, SETTINGS))
    assert "install Kueue" in str(e.value) and "remove the label" not in str(e.value)
    assert "delete the mesh and create it again without the label" in str(e.value)


def test_an_active_workload_an_older_release_left_out_of_its_queue_gets_the_reason_kueue_requeues():
    """An operator before Requeued's ``Deactivated`` released a Workload Kueue deactivated with
    the derived reason: Kueue (v0.17) takes no activation of it as one, so, activated, it stayed
    out of its queue. The reason is rewritten once it is active, the cause kept in the message."""
    message = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    older = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", message),
                     cond("Requeued", "False", "DeactivatedDueToRequeuingLimitExceeded", message))
    older["spec"] = {"active": True}
    patch = workloads.reactivation_patch(older, LATER)
    assert patch is not None and patch["metadata"] == {"resourceVersion": "7"}
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("False", "Deactivated")
    assert by_type["Requeued"]["message"] == message
    assert by_type["Evicted"] == older["status"]["conditions"][0]
    # Not while it is inactive (Kueue's decision, or a suspend), nor while Kueue is about to
    # deactivate it, nor once its reason is one Kueue requeues after.
    assert workloads.reactivation_patch({**older, "spec": {"active": False}}, LATER) is None
    target = workload(*older["status"]["conditions"], cond("DeactivationTarget", "True", "RequeuingLimitExceeded"))
    assert workloads.reactivation_patch({**target, "spec": {"active": True}}, LATER) is None
    released = workload(cond("Requeued", "False", "Deactivated", message))
    assert workloads.reactivation_patch({**released, "spec": {"active": True}}, LATER) is None
