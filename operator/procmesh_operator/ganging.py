"""A mesh is a gang: every proc is placed, or none holds resources. Pure.

Two mechanisms, chosen per cluster by :func:`resolve_mode` (``--gang``, default ``auto``):

* ``podgroup`` (Kubernetes 1.36+ with the ``GenericWorkload`` and ``GangScheduling`` gates and
  ``scheduling.k8s.io/v1alpha2`` served): one PodGroup per mesh, named like the mesh and owned by
  it, with ``spec.schedulingPolicy.gang.minCount`` = every proc; each proc pod names it in
  ``spec.schedulingGroup.podGroupName``. The kube-scheduler holds the pods at its Permit stage
  until all of them fit, then binds them together: no pod is bound, so no kubelet starts one and
  no device plugin hands out a GPU, while the mesh cannot be complete.
* ``gate`` (any cluster): each proc pod is created with the scheduling gate
  :data:`contract.GANG_GATE`, so the scheduler ignores it. Once every pod of the mesh exists,
  :mod:`.reconciling` runs :func:`procmesh_operator.fitting.fit` on a fresh list of nodes and
  pods and, only if the whole mesh fits, lifts the gate from all its pods at once.
  The check and the lift are not atomic with the scheduler's bindings: if something else takes
  the room meanwhile, part of the gang binds and the rest stays Pending. :func:`stalled` sees
  that after a bounded wait, and :mod:`.reconciling` then deletes every pod of the mesh, so it
  is recreated behind the gate (released again after a back-off that doubles per stall).
* ``off``: neither (pods are scheduled one by one, as before issue 16).

:mod:`.reconciling` creates what :func:`render_pod_group` returns and passes every rendered pod
through :func:`join`; :mod:`.statuses` turns a :class:`Hold` into the ``Scheduled`` condition.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import names, rendering, specs

AUTO = "auto"
POD_GROUP = "podgroup"
GATE = "gate"
OFF = "off"
MODES = (AUTO, POD_GROUP, GATE, OFF)

POD_GROUP_GROUP = "scheduling.k8s.io"
POD_GROUP_VERSION = "v1alpha2"
POD_GROUP_API = f"/apis/{POD_GROUP_GROUP}/{POD_GROUP_VERSION}"
POD_GROUP_PLURAL = "podgroups"

# --- Reasons of the Scheduled condition (statuses.py) -----------------------------------------
ALL_PROCS_SCHEDULED = "AllProcsScheduled"  # Scheduled=True: every proc's pod is on a node
#: Scheduled=False: gate mode, not every pod of the mesh exists yet, so none is released.
WAITING_FOR_GANG = "WaitingForGang"
#: Scheduled=False: the whole mesh does not fit now (our check, or the scheduler's word).
UNSCHEDULABLE = "Unschedulable"
SCHEDULING = "Scheduling"  # Scheduled=False: released (or not gated) and not yet bound
#: Scheduled=False: gate mode, a released gang was partly bound and the rest unschedulable for
#: the bounded wait (--gang-stall-seconds): every pod is deleted and the mesh recreated behind
#: the gate, released again no sooner than the back-off.
GANG_STALLED = "GangStalled"


@dataclasses.dataclass(frozen=True)
class Hold:
    """Why the gang is not placed yet: a reason of the Scheduled condition and a message."""

    reason: str
    message: str


def resolve_mode(setting: str, discovery: Mapping[str, Any] | None) -> str:
    """The mechanism for ``--gang=setting`` given the API discovery document of
    :data:`POD_GROUP_API` (None when that group version is not served)."""
    if setting != AUTO:
        return setting
    resources = (discovery or {}).get("resources") or []
    served = any(r.get("name") == POD_GROUP_PLURAL for r in resources)
    return POD_GROUP if served else GATE


def mode_for(mode: str, mesh: specs.MeshSpec) -> str:
    """The cluster's ``mode`` as it applies to ``mesh``: a one-proc mesh is all-or-nothing by
    itself and needs no gang (no PodGroup, no gate, no fit check). A dra mesh is gated, never
    in a PodGroup: with v1.36's alpha gang scheduling, pods whose shared ResourceClaim was
    already allocated were bound to nodes the allocation excludes (tests/integration/operator/
    test_dra.py, 2 of 5 runs); the gate's release leaves each pod to the scheduler's DRA path."""
    if mesh.size < 2:
        return OFF
    if mode == POD_GROUP and mesh.gpus.mode == contract.GPU_MODE_DRA:
        return GATE
    return mode


def pod_groups_path(namespace: str, name: str | None = None) -> str:
    base = f"{POD_GROUP_API}/namespaces/{namespace}/{POD_GROUP_PLURAL}"
    return base if name is None else f"{base}/{name}"


def pod_group_name(mesh: specs.MeshSpec) -> str:
    """The PodGroup of this incarnation of the mesh: its name and the start of its uid. Pods
    name their group by name only, so a mesh deleted and created again at once (whose earlier
    pods, still running, name the earlier group) must not share it."""
    return f"{mesh.name}-{mesh.uid[:8]}"


def render_pod_group(mesh: specs.MeshSpec) -> dict[str, Any]:
    """The PodGroup of ``mesh``: a gang of every proc. Immutable once created, like the mesh's
    shape. Priority is not copied: ``spec.priorityClassName`` needs the WorkloadAwarePreemption
    gate; the pods carry ``template.priorityClassName`` themselves."""
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {
            "name": pod_group_name(mesh),
            "namespace": mesh.namespace,
            "labels": names.mesh_labels(mesh.name),
            "ownerReferences": [rendering.owner_reference(mesh)],
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": mesh.size}}},
    }


def join(pod: Mapping[str, Any], mesh: specs.MeshSpec, mode: str) -> dict[str, Any]:
    """``pod`` (as rendered) made a member of the mesh's gang under ``mode``. ``pod`` is left
    unchanged; the copy shares all but its top level and its spec's with it (a deep copy here
    was an eighth of the operator's CPU while it created 6,400 pods)."""
    out = dict(pod)
    spec = out["spec"] = dict(out.get("spec") or {})
    if mode == POD_GROUP:
        spec["schedulingGroup"] = {"podGroupName": pod_group_name(mesh)}
    elif mode == GATE:
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != contract.GANG_GATE]
        spec["schedulingGates"] = [*gates, {"name": contract.GANG_GATE}]
    return out


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries our gang gate."""
    return any(g.get("name") == contract.GANG_GATE
               for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def ungate_patch(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch removing our gate and keeping anyone else's (gates can only be removed)."""
    rest = [g for g in (pod.get("spec") or {}).get("schedulingGates") or []
            if g.get("name") != contract.GANG_GATE]
    return {"spec": {"schedulingGates": rest or None}}


def is_bound(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def waiting_hold(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]]) -> Hold | None:
    """Gate mode: the hold while some pods of the mesh do not exist yet (none is released)."""
    missing = [r for r in range(mesh.size) if r not in pods]
    if not missing:
        return None
    return Hold(WAITING_FOR_GANG,
                f"{mesh.size - len(missing)} of {mesh.size} pods exist; their scheduling gate "
                f"{contract.GANG_GATE} is lifted once all exist and the whole mesh fits")


def scheduler_hold(pod_group: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]],
                   explanation: str | None = None) -> Hold | None:
    """PodGroup mode: the scheduler's verdict, from the PodGroup's ``PodGroupScheduled``
    condition and the first unbound pod's ``PodScheduled`` condition (either may come first),
    followed by ``explanation`` (the operator's own fit check, which names the gang's
    shortfall where the scheduler says only "pod group is unschedulable"). None while the
    scheduler has said nothing against the gang."""
    group = next((c for c in ((pod_group or {}).get("status") or {}).get("conditions") or []
                  if c.get("type") == "PodGroupScheduled" and c.get("status") == "False"), None)
    pod_name, pod_c = "", None
    for pod in pods:
        if is_bound(pod):
            continue
        pod_c = next((c for c in (pod.get("status") or {}).get("conditions") or []
                      if c.get("type") == "PodScheduled" and c.get("status") == "False"
                      and c.get("reason") != "SchedulingGated"), None)
        if pod_c is not None:
            pod_name = str((pod.get("metadata") or {}).get("name", "?"))
            break
    if group is None and pod_c is None:
        return None
    reason = str((group or {}).get("reason") or (pod_c or {}).get("reason") or UNSCHEDULABLE)
    message = "the kube-scheduler holds the whole gang"
    if group is not None and group.get("message"):
        message += f": {group['message']}"
    if pod_c is not None:
        message += f"; pod {pod_name} is Pending: {pod_c.get('message', '')}"
    if explanation:
        message += f"; the operator's check: {explanation}"
    return Hold(reason, message)


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def stalled(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]], now: float,
            wait_seconds: float) -> str | None:
    """Gate mode: a message when the released gang is partly bound and one of its unbound pods
    has been Unschedulable for ``wait_seconds`` (judged at ``now``, epoch seconds), else None.
    A gang with no pod bound holds nothing and is left to wait."""
    live = [p for p in pods.values()
            if not (p.get("metadata") or {}).get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if len(live) < mesh.size or any(is_gated(p) for p in live):
        return None
    unbound = [p for p in live if not is_bound(p)]
    if not unbound or len(unbound) == len(live):
        return None
    for pod in unbound:
        for c in (pod.get("status") or {}).get("conditions") or []:
            since = _epoch(c.get("lastTransitionTime"))
            if c.get("type") == "PodScheduled" and c.get("status") == "False" \
                    and c.get("reason") == UNSCHEDULABLE and since is not None \
                    and now - since >= wait_seconds:
                name = (pod.get("metadata") or {}).get("name", "?")
                return (f"{len(live) - len(unbound)} of {mesh.size} released procs were bound "
                        f"but pod {name} stayed unschedulable for {wait_seconds:g} s "
                        f"({c.get('message', '')}): something took the room after the fit "
                        f"check; every pod is deleted and recreated behind the gate")
    return None
