"""A queued mesh's Kueue Workload, as pure functions: render it, read its admission, release it.

A ProcMesh labelled ``kueue.x-k8s.io/queue-name`` is one Kueue workload: the operator creates a
``Workload`` (``kueue.x-k8s.io/v1beta2``, owned by the mesh) with one pod set of every proc and
keeps the mesh without pods until Kueue admits it. This is Kueue's contract with an external job
controller (what its jobframework does for built-in kinds, in
``pkg/controller/jobframework/reconciler.go``), done by our operator for ProcMesh:

- Kueue reserves quota and admits (``QuotaReserved`` and ``Admitted`` True) -> pods are created.
- Kueue evicts (``Evicted=True``: preemption, deactivation, a stopped queue) -> the operator
  deletes every proc pod, and once none is left it clears ``status.admission`` with
  ``QuotaReserved=False`` (reason ``Pending``) and ``Requeued`` (True after a preemption), as
  jobframework's ``UnsetQuotaReservationWithCondition`` does: that is what puts the workload
  back in its queue.

:mod:`.admitting` does the API calls; :mod:`.reconciling` treats a mesh that is not admitted as
suspended and lays :func:`overlay` over its status; :mod:`.handlers` watches Workloads by the
mesh label.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import names, rendering, specs

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
PLURAL = "workloads"
#: The label that makes a ProcMesh queueable (on the ProcMesh itself), as on a Kueue Job.
QUEUE_NAME_LABEL = contract.KUEUE_QUEUE_LABEL
#: The one pod set of a mesh's Workload: every proc.
POD_SET = "procs"
#: On a mesh's Workload: a digest of the mesh's demand it was rendered from (:func:`demand_digest`),
#: so that a template changed while the mesh is queued is seen without comparing bodies that
#: the API server may have reformatted.
DEMAND_DIGEST_ANNOTATION = "procmesh.io/demand-digest"
#: On a mesh's Workload while the operator keeps it inactive for ``spec.suspend``
#: (:func:`active_patch`): its deactivation is the operator's, whatever Kueue's conditions say.
#: Kueue keeps the Evicted condition of its own deactivation (``DeactivatedDueTo...``) until
#: it admits the Workload again, also after someone activates it: without the mark, a mesh
#: suspended and resumed before that re-admission read as deactivated by Kueue, and stayed so.
#: An operator before the mark deactivated with ``spec.active`` alone: its write is known by
#: its field manager (:func:`active_set_by_operator`).
SUSPENDED_ANNOTATION = "procmesh.io/suspended"

# --- Kueue's condition types and reasons we read or write (apis/kueue/v1beta2/workload_types.go)
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
REQUEUED = "Requeued"
DEACTIVATION_TARGET = "DeactivationTarget"
#: The start of the Evicted reason of a Workload Kueue deactivated itself (ReasonWithCause).
DEACTIVATED_DUE_TO = "DeactivatedDueTo"
#: The Requeued reason of a deactivated Workload released (:func:`release_patch`), its cause
#: left to the message: Kueue (v0.17) sets Requeued=True (``Reactivated``) on an activation only
#: after this very reason, and a Workload left Requeued=False is never admitted again. Kueue's
#: own job controllers write the derived ``DeactivatedDueTo...`` there, which Kueue matches
#: only from kubernetes-sigs/kueue#14874 on: an activated Workload stayed out of its queue.
DEACTIVATED = "Deactivated"
#: Evicted reasons after which jobframework sets Requeued=True.
REQUEUED_AFTER = ("Preempted", "NodeFailures")
#: Kept by the job's controller (here the operator): whether every proc is ready. Kueue's
#: waitForPodsReady, where its Configuration enables it, evicts an admitted workload whose
#: PodsReady is not True within its timeout (a workload without the condition counts as not
#: ready) and requeues it after a back-off, so that a mesh admitted but never placed gives its
#: quota back. Reasons as jobframework's generatePodsReadyCondition writes them.
PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"  # False: not every proc has been ready since the admission
WAIT_FOR_RECOVERY = "WaitForRecovery"  # False: every proc was ready, and one is not now
STARTED = "Started"  # True: every proc ready
RECOVERED = "Recovered"  # True: every proc ready again after a WaitForRecovery

# --- What a mesh's Workload says (Admission.state) -------------------------------------------
STATE_ADMITTED = "Admitted"  # run the procs
STATE_QUEUED = "Queued"  # no pods: waiting for quota (or for Kueue to look)
STATE_EVICTED = "Evicted"  # stop every proc, then release the quota (release_patch)

PHASE_QUEUED = "Queued"  # status.phase of a mesh that is not admitted (display only)
#: Why a mesh's procs stop when its Workload is deleted under them (our reason, not Kueue's):
#: as Kueue's job controllers stop a job that lost its Workload, so that it queues again.
WORKLOAD_DELETED = "WorkloadDeleted"


def queue_name(body: Mapping[str, Any]) -> str | None:
    """The LocalQueue a ProcMesh body asks for, or None: not queued."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_NAME_LABEL)
    return str(value) if value else None


def workload_name(mesh: specs.MeshSpec) -> str:
    """One Workload per incarnation of the mesh (a recreated mesh of this name gets its own)."""
    return f"procmesh-{mesh.name}-{mesh.uid[:8]}"


def workloads_path(namespace: str, name: str | None = None, *, status: bool = False) -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    if name is None:
        return base
    return f"{base}/{name}/status" if status else f"{base}/{name}"


def _container_demand(container: Mapping[str, Any]) -> dict[str, Any]:
    """A container's name, image and resources, with requests defaulted from limits as the API
    server defaults them in a pod (a template is not defaulted, and Kueue counts requests)."""
    kept = {k: container[k] for k in ("name", "image") if k in container}
    kept.setdefault("name", contract.CONTAINER_NAME)
    resources = container.get("resources") or {}
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    if limits or requests:
        kept["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    return kept


def pod_set_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What Kueue needs of a proc's pod: its containers' requests and what decides its node
    (Kueue sums requests per pod set and matches flavors against node selectors and
    tolerations), not its env, probes or volumes."""
    spec = pod.get("spec") or {}
    kept: dict[str, Any] = {"containers": [_container_demand(c) for c in spec.get("containers") or []]}
    if spec.get("initContainers"):
        kept["initContainers"] = [_container_demand(c) for c in spec["initContainers"]]
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "overhead",
                "runtimeClassName", "restartPolicy"):
        if spec.get(key):
            kept[key] = spec[key]
    labels = {k: v for k, v in ((pod.get("metadata") or {}).get("labels") or {}).items()
              if k == contract.MESH_LABEL}
    return {"metadata": {"labels": labels}, "spec": kept}


def demand_digest(mesh: specs.MeshSpec, pod: Mapping[str, Any]) -> str:
    """What Kueue admits the mesh for (its pod set and its PriorityClass's name), as a digest:
    it changes when an edit of the mesh's template changes what its procs request or where
    they may run."""
    demand = {"count": mesh.size, "template": pod_set_template(pod),
              "priorityClassName": mesh.template.get("priorityClassName")}
    return hashlib.sha256(json.dumps(demand, sort_keys=True).encode()).hexdigest()[:16]


def demand_changed(workload: Mapping[str, Any], digest: str) -> bool:
    """Whether the Workload was rendered from another demand than ``digest`` (or by an
    operator that wrote no digest)."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    return annotations.get(DEMAND_DIGEST_ANNOTATION) != digest


def demand_patch(workload: Mapping[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that gives a Workload holding no quota the pod sets and priority of
    ``rendered`` (:func:`render_workload`), as Kueue lets them change until it reserves quota;
    Kueue then queues it with the new requests. Carries the resourceVersion it was computed
    from: if Kueue reserved quota meanwhile, the patch fails instead of changing an admitted
    workload."""
    spec = rendered["spec"]
    return {"metadata": {"resourceVersion": (workload.get("metadata") or {}).get("resourceVersion"),
                         "annotations": dict(rendered["metadata"]["annotations"])},
            "spec": {"podSets": spec["podSets"], "priority": spec.get("priority"),
                     "priorityClassRef": spec.get("priorityClassRef")}}


def render_workload(mesh: specs.MeshSpec, queue: str, pod: Mapping[str, Any],
                    priority: int | None) -> dict[str, Any]:
    """The mesh's Workload: one pod set of ``mesh.size`` copies of ``pod`` (a rendered proc),
    in LocalQueue ``queue``, with the value of the pods' PriorityClass (``priority``: Kueue
    orders and preempts by ``spec.priority``; None when the mesh names none)."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "active": not mesh.suspend,  # a suspended mesh holds no quota
        "podSets": [{"name": POD_SET, "count": mesh.size, "template": pod_set_template(pod)}],
    }
    priority_class = (mesh.template.get("priorityClassName") or None)
    if priority_class is not None and priority is not None:
        spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                    "name": str(priority_class)}
        spec["priority"] = priority
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(mesh),
            "namespace": mesh.namespace,
            "labels": {contract.MESH_LABEL: mesh.name,
                       contract.MANAGED_BY_LABEL: contract.MANAGED_BY},
            "annotations": {DEMAND_DIGEST_ANNOTATION: demand_digest(mesh, pod)},
            "ownerReferences": [rendering.owner_reference(mesh)],
        },
        "spec": spec,
    }


@dataclasses.dataclass(frozen=True)
class Admission:
    """What a mesh's Workload says: its :data:`state`, Kueue's reason and message for it, and
    whether quota is still reserved (an eviction is over only once it is released)."""

    state: str
    reason: str
    message: str
    reserved: bool = False
    cluster_queue: str | None = None
    #: The assigned ResourceFlavors' bodies, read while the mesh has pods to create.
    flavors: tuple[Mapping[str, Any], ...] = ()
    #: The Workload as last read or written (None: none, as after its deletion under procs).
    workload: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)


def _find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any]:
    for c in conditions or []:
        if c.get("type") == type_:
            return c
    return {}


def read(workload: Mapping[str, Any] | None) -> Admission:
    """The admission state of a Workload (None: not created yet). An eviction counts (state
    :data:`STATE_EVICTED`) while quota is still reserved: the procs must stop and the quota be
    released; after that the workload is queued again, and says what evicted it."""
    if workload is None:
        return Admission(STATE_QUEUED, "WorkloadCreated", "the mesh's Workload was just created")
    status = workload.get("status") or {}
    conditions = status.get("conditions")
    reserved_c = _find(conditions, QUOTA_RESERVED)
    reserved = reserved_c.get("status") == "True"
    cluster_queue = (status.get("admission") or {}).get("clusterQueue")
    evicted = _find(conditions, EVICTED)
    if evicted.get("status") == "True" and reserved:
        return Admission(STATE_EVICTED, str(evicted.get("reason") or EVICTED),
                         str(evicted.get("message") or ""), reserved, cluster_queue)
    if not (workload.get("spec") or {}).get("active", True):
        if deactivated_by_kueue(workload):
            meta = workload.get("metadata") or {}
            return Admission(STATE_QUEUED, str(evicted.get("reason") or "Deactivated"),
                             f"Kueue deactivated the mesh's Workload: {evicted.get('message') or ''}; it is not "
                             f"queued again until it is active: kubectl patch {PLURAL}.{GROUP} {meta.get('name')} "
                             f"-n {meta.get('namespace')} --type merge -p '{{\"spec\":{{\"active\":true}}}}'")
        return Admission(STATE_QUEUED, "Deactivated", "spec.suspend is true: the mesh's Workload "
                         "is inactive and holds no quota")
    admitted = _find(conditions, ADMITTED)
    if reserved and admitted.get("status") == "True":
        return Admission(STATE_ADMITTED, ADMITTED, str(reserved_c.get("message") or ""), True,
                         cluster_queue)
    if reserved:  # quota reserved, admission checks pending
        return Admission(STATE_QUEUED, str(admitted.get("reason") or ADMITTED),
                         str(admitted.get("message") or ""), True, cluster_queue)
    if not reserved_c:
        # StrictFIFO: Kueue reports only on the head of the queue; the rest just wait.
        return Admission(STATE_QUEUED, "Pending", "waiting in its queue (Kueue reports on a "
                         "workload once it is the next to admit)")
    message = str(reserved_c.get("message") or "")
    before = str(evicted.get("message") or "")
    if evicted.get("status") == "True" and before and before not in message:
        message = f"{message} (evicted before: {evicted.get('reason')}: {before})"
    return Admission(STATE_QUEUED, str(reserved_c.get("reason") or "Pending"), message)


def active_patch(active: bool) -> dict[str, Any]:
    """The merge patch that makes the Workload active (a resume) or inactive for ``spec.suspend``,
    marked as the operator's (:data:`SUSPENDED_ANNOTATION`) while inactive."""
    return {"metadata": {"annotations": {SUSPENDED_ANNOTATION: None if active else "true"}},
            "spec": {"active": active}}


def deactivated_by_kueue(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue itself deactivated the Workload (waitForPodsReady's requeuing limit, a
    rejected admission check, a maximum execution time), not the operator for ``spec.suspend``:
    Kueue marks it ``DeactivationTarget`` first, then evicts it with the reason ``Deactivated``
    followed by that cause (``DeactivatedDueToRequeuingLimitExceeded``). Such a Workload stays
    inactive until someone activates it: the operator must not undo Kueue's decision. One the
    operator deactivated last (:data:`SUSPENDED_ANNOTATION`, or by an operator before that mark
    :func:`active_set_by_operator`) is not Kueue's, though Kueue's conditions of an earlier
    deactivation may still be there."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    if not (workload.get("spec") or {}).get("active", True) \
            and (annotations.get(SUSPENDED_ANNOTATION) or active_set_by_operator(workload)):
        return False
    if deactivating(workload):
        return True
    evicted = _find((workload.get("status") or {}).get("conditions"), EVICTED)
    return evicted.get("status") == "True" and str(evicted.get("reason") or "").startswith(DEACTIVATED_DUE_TO)


def deactivating(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue has decided to deactivate the Workload (``DeactivationTarget=True``), which
    its own update of ``spec.active`` then carries out. A suspend leaves that write to Kueue:
    made by the operator, it would read as the suspend's (:data:`SUSPENDED_ANNOTATION`,
    :func:`active_set_by_operator`), and the resume would undo Kueue's decision."""
    conditions = (workload.get("status") or {}).get("conditions")
    return _find(conditions, DEACTIVATION_TARGET).get("status") == "True"


def active_set_by_operator(workload: Mapping[str, Any]) -> bool:
    """Whether an operator's write set the Workload's ``spec.active`` to what it is now: the API
    server gives a field to the manager of the write that last changed it (``managedFields``;
    ours is :data:`names.FIELD_MANAGER`, and Kueue deactivates with an update of its own), so
    an operator that is its only manager made it so, by creating it suspended or by a suspend.
    What tells an older operator's suspend, which wrote nothing but ``spec.active: false``."""
    managers = {entry.get("manager") for entry in (workload.get("metadata") or {}).get("managedFields") or []
                if "f:active" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})}
    return managers == {names.FIELD_MANAGER}


def deleted(name: str) -> Admission:
    """What a mesh whose Workload ``name`` is gone while its procs run is told: stop them all
    (quota is no longer held for them), then queue again with a new Workload."""
    return Admission(STATE_EVICTED, WORKLOAD_DELETED,
                     f"the mesh's Kueue Workload {name} was deleted while its procs ran (a new "
                     f"one queues the mesh once they are gone)")


def assigned_flavors(workload: Mapping[str, Any]) -> list[str]:
    """The ResourceFlavors Kueue assigned to the mesh's pod set (sorted, no repeats)."""
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments")
    return sorted({str(f) for a in assignments or [] for f in (a.get("flavors") or {}).values()})


def with_flavors(template: Mapping[str, Any], flavors: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:
    """The mesh's pod template with the assigned flavors' ``nodeLabels`` added to its node
    selector and their ``tolerations`` to its tolerations, as Kueue does for the jobs it
    starts, so the procs land on the nodes whose quota they were admitted against. A label the
    template already sets to another value is left as the template has it."""
    selector = {str(k): str(v) for k, v in (template.get("nodeSelector") or {}).items()}
    tolerations = list(template.get("tolerations") or [])
    for flavor in flavors:
        spec = flavor.get("spec") or {}
        for key, value in (spec.get("nodeLabels") or {}).items():
            selector.setdefault(str(key), str(value))
        for toleration in spec.get("tolerations") or []:
            if toleration not in tolerations:
                tolerations.append(toleration)
    result = dict(template)
    if selector:
        result["nodeSelector"] = selector
    if tolerations:
        result["tolerations"] = tolerations
    return result


def _set(conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
         generation: int, now: str) -> None:
    """Kubernetes' SetStatusCondition: the transition time moves only when the status does."""
    for c in conditions:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update(status=status, reason=reason, message=message,
                     observedGeneration=generation)
            return
    conditions.append({"type": type_, "status": status, "reason": reason, "message": message,
                       "observedGeneration": generation, "lastTransitionTime": now})


def release_patch(workload: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The status patch that ends an eviction once no proc is left: quota released, the
    workload back in its queue. Carries the resourceVersion it was computed from, so a
    concurrent write by Kueue makes it fail (and the reconcile retry) instead of being lost."""
    meta = workload.get("metadata") or {}
    status = workload.get("status") or {}
    generation = int(meta.get("generation") or 0)
    conditions = [dict(c) for c in status.get("conditions") or []]
    evicted = _find(conditions, EVICTED)
    reason = str(evicted.get("reason") or EVICTED)
    message = str(evicted.get("message") or "evicted")
    _set(conditions, REQUEUED, "True" if reason in REQUEUED_AFTER else "False",
         DEACTIVATED if reason.startswith(DEACTIVATED_DUE_TO) else reason, message,
         generation, now)
    _set(conditions, QUOTA_RESERVED, "False", "Pending", message, generation, now)
    _set(conditions, ADMITTED, "False", "NoReservation", "The workload has no reservation",
         generation, now)
    if _find(conditions, PODS_READY):  # a re-admission waits for its procs again
        _set(conditions, PODS_READY, "False", WAIT_FOR_START, message, generation, now)
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": {"admission": None, "conditions": conditions}}


def reactivation_patch(workload: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """The status patch that lets Kueue queue again an active Workload whose Requeued=False
    still carries a derived ``DeactivatedDueTo...`` reason, as an operator before
    :data:`DEACTIVATED` wrote it in its release: Kueue (v0.17) takes an activation as one only
    after the reason ``Deactivated``, so such a Workload, activated, stayed out of its queue for
    good. None for any other Workload (and one Kueue is about to deactivate)."""
    meta = workload.get("metadata") or {}
    conditions = [dict(c) for c in (workload.get("status") or {}).get("conditions") or []]
    requeued = _find(conditions, REQUEUED)
    if not (workload.get("spec") or {}).get("active", True) \
            or _find(conditions, DEACTIVATION_TARGET).get("status") == "True" \
            or requeued.get("status") != "False" \
            or not str(requeued.get("reason") or "").startswith(DEACTIVATED_DUE_TO):
        return None
    _set(conditions, REQUEUED, "False", DEACTIVATED, str(requeued.get("message") or ""),
         int(meta.get("generation") or 0), now)
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {"conditions": conditions}}


def pods_ready(conditions: Sequence[Mapping[str, Any]] | None, admitted: bool, ready: int,
               size: int) -> tuple[str, str, str] | None:
    """The PodsReady condition (status, reason, message) that the Workload with ``conditions``
    should have, given whether it is admitted and how many of the mesh's ``size`` procs are
    ready; None when the one it has says that already (status and reason, as jobframework
    compares), or has none and should say WaitForStart (Kueue reads none so: no write per
    queued mesh)."""
    current = _find(conditions, PODS_READY)
    if admitted and ready >= size:
        recovering = current.get("reason") in (WAIT_FOR_RECOVERY, RECOVERED)
        wanted = ("True", RECOVERED if recovering else STARTED, f"all {size} procs ready")
    elif admitted and (current.get("status") == "True" or current.get("reason") == WAIT_FOR_RECOVERY):
        wanted = ("False", WAIT_FOR_RECOVERY, f"{ready} of {size} procs ready: waiting for the others "
                  f"to recover")
    else:
        wanted = ("False", WAIT_FOR_START, f"{ready} of {size} procs ready" if admitted
                  else "not admitted: no proc runs")
    if (current.get("status"), current.get("reason")) == wanted[:2] or (not current and wanted[1] == WAIT_FOR_START):
        return None
    return wanted


def pods_ready_patch(workload: Mapping[str, Any], condition: tuple[str, str, str], now: str
                     ) -> dict[str, Any]:
    """The status patch that sets the Workload's PodsReady to ``condition`` (as
    :func:`pods_ready` gave it), with the resourceVersion it was computed from (as
    :func:`release_patch`: a concurrent write by Kueue fails it rather than being undone)."""
    meta = workload.get("metadata") or {}
    conditions = [dict(c) for c in (workload.get("status") or {}).get("conditions") or []]
    _set(conditions, PODS_READY, *condition, int(meta.get("generation") or 0), now)
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {"conditions": conditions}}


# --- The mesh's status -------------------------------------------------------------------------

def verdicts(admission: Admission, queue: str) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    """(the Admitted condition, the wait) as (status, reason, message) triples. The Admitted
    condition carries Kueue's own reason; the wait (Ready, Scheduled and Progressing of a mesh
    that is not admitted) says ``Queued``, or Kueue's eviction reason (``Preempted``...)."""
    if admission.state == STATE_ADMITTED:
        where = f" in ClusterQueue {admission.cluster_queue}" if admission.cluster_queue else ""
        return ("True", ADMITTED, f"QuotaReserved=True: admitted by Kueue{where}"), \
            ("True", ADMITTED, "")
    if admission.state == STATE_EVICTED:
        said = "" if admission.reason == WORKLOAD_DELETED else f"Evicted=True ({admission.reason}): "
        message = (f"{said}{admission.message}; its procs are "
                   f"stopped, and it runs again once Kueue re-admits it from LocalQueue {queue}")
        return ("False", admission.reason, message), ("False", admission.reason, message)
    message = (f"QuotaReserved=False ({admission.reason}): {admission.message}; no proc runs "
               f"until Kueue admits the mesh from LocalQueue {queue}")
    return ("False", admission.reason, message), ("False", contract.QUEUED, message)


def overlay(status: Mapping[str, Any], previous: Mapping[str, Any] | None, admission: Admission,
            queue: str, generation: int, now: str, *, suspended: bool = False) -> dict[str, Any]:
    """``status`` (as :func:`procmesh_operator.statuses.compute_status` computed it, for a mesh
    treated as suspended when not admitted) with the Admitted condition set (its transition
    time kept from ``previous``, the status before) and, while the mesh is not admitted, Ready,
    Scheduled and Progressing saying why it has no procs; ``suspended`` (``spec.suspend``:
    the user's reason, which those keep) only the Admitted condition."""
    admitted, wait = verdicts(admission, queue)
    conditions = [dict(c) for c in status.get("conditions") or []]
    before = _find((previous or {}).get("conditions"), contract.ADMITTED)
    if before and not _find(conditions, contract.ADMITTED):
        conditions.append(dict(before))
    _set(conditions, contract.ADMITTED, *admitted, generation, now)
    result = dict(status, conditions=conditions)
    if admission.state != STATE_ADMITTED and not suspended:
        _, reason, message = wait
        for type_, value in ((contract.READY, "False"), (contract.SCHEDULED, "False"),
                             (contract.PROGRESSING, "True")):
            _set(conditions, type_, value, reason, message, generation, now)
            # ``status`` was computed for a suspended mesh (Progressing False): the time of the
            # last real transition is the previous status's, or every reconcile of a queued mesh
            # would move it and write the status again.
            kept = _find((previous or {}).get("conditions"), type_)
            if kept.get("status") == value and kept.get("lastTransitionTime"):
                for c in conditions:
                    if c.get("type") == type_:
                        c["lastTransitionTime"] = kept["lastTransitionTime"]
        result["phase"] = PHASE_QUEUED
    return result
