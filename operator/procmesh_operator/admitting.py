"""The Kueue step of one reconcile: a queued mesh's Workload, created, read, and released.

Called by :mod:`.reconciling` for a mesh labelled ``kueue.x-k8s.io/queue-name``, after the
Service and before the pods. :func:`admission` creates the mesh's Workload once (rendered by
:mod:`.workloads` from a proc pod, with the value of the mesh's PriorityClass) and returns what
it says (with the assigned ResourceFlavors while procs are to be created: their node labels
and tolerations go into the pods, :func:`workloads.with_flavors`); when an eviction has left no
proc pod, it releases the Workload's quota so that Kueue
queues it again. A Workload deleted while procs run stops them (:func:`workloads.deleted`)
before a new one is created. ``spec.suspend`` deactivates the Workload (``spec.active: false``), so a
suspended mesh gives its quota back (Kueue evicts it as ``Deactivated``), and resuming
reactivates it: it queues again; a Workload Kueue deactivated itself (waitForPodsReady's requeuing
limit) stays inactive until someone activates it (the suspend's own deactivation is marked, so it
is never taken for Kueue's: :data:`workloads.SUSPENDED_ANNOTATION`; an older operator's, unmarked,
is known by its field manager: :func:`workloads.active_set_by_operator`; a suspend leaves to
Kueue the write of a deactivation it has decided on: :func:`workloads.deactivating`). A template edited while the mesh holds no quota is carried
into the Workload (:func:`_keep_demand`), so Kueue admits the mesh for what its pods will
request. The reconcile creates pods only for an admitted mesh; once its status is computed,
:func:`report_readiness` keeps the Workload's PodsReady condition, which Kueue's
waitForPodsReady reads.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from procmesh_operator import kubeclient, rendering, specs, workloads
from procmesh_operator import settings as settings_


class KueueNotServed(Exception):
    """The mesh is labelled for a queue but the cluster serves no Kueue Workloads."""


async def _priority(client: kubeclient.KubeClient, mesh: specs.MeshSpec) -> int | None:
    """The value of ``spec.template.priorityClassName`` (None: none named, or none of that
    name, which the pods' creation then reports)."""
    name = mesh.template.get("priorityClassName")
    if not name:
        return None
    found = await client.get_or_none(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
    return int(found["value"]) if found is not None and "value" in found else None


async def _served(client: kubeclient.KubeClient, namespace: str) -> bool:
    """Whether the cluster serves Kueue's Workloads (a list of at most one item says so)."""
    try:
        await client.request("GET", workloads.workloads_path(namespace), params={"limit": "1"})
    except kubeclient.ApiError as e:
        if e.not_found:
            return False
        raise
    return True


async def _keep_demand(client: kubeclient.KubeClient, mesh: specs.MeshSpec, queue: str, path: str,
                       workload: dict[str, Any], settings: settings_.Settings) -> dict[str, Any]:
    """The Workload of a mesh that holds no quota, updated if the mesh's template changed what
    its procs request since it was rendered: else Kueue would admit it for the old requests
    and the pods would take more than the quota counts. Once quota is reserved the pod sets
    are Kueue's to keep (its webhook refuses a change)."""
    pod = rendering.render_pod(mesh, 0, rendering.ProcPlacement(), settings)
    if not workloads.demand_changed(workload, workloads.demand_digest(mesh, pod)):
        return workload
    rendered = workloads.render_workload(mesh, queue, pod, await _priority(client, mesh))
    try:
        return await client.merge_patch(path, workloads.demand_patch(workload, rendered))
    except kubeclient.ApiError as e:
        if not e.conflict:
            raise
        # Kueue wrote it meanwhile (perhaps reserving quota): its event brings the mesh back.
        return await client.get(path)


async def admission(client: kubeclient.KubeClient, mesh: specs.MeshSpec, queue: str,
                    pods: Mapping[int, Mapping[str, Any]],
                    settings: settings_.Settings) -> workloads.Admission:
    """Ensure the mesh's Workload and read its admission; ``pods``: the mesh's pods now (an
    eviction releases the quota only once there are none)."""
    path = workloads.workloads_path(mesh.namespace, workloads.workload_name(mesh))
    workload = await client.get_or_none(path)
    if workload is None and pods and not mesh.suspend and await _served(client, mesh.namespace):
        # Deleted under running procs (by hand, or while this operator was down): they hold no
        # quota now. As Kueue does for its jobs, they stop first, and the mesh queues again with
        # a new Workload once none is left, behind those that waited, not ahead of them. (Not
        # when Kueue's API is gone, uninstalled: that is reported below, the procs left alone.)
        return workloads.deleted(workloads.workload_name(mesh))
    if workload is None:
        pod = rendering.render_pod(mesh, 0, rendering.ProcPlacement(), settings)
        body = workloads.render_workload(mesh, queue, pod, await _priority(client, mesh))
        try:
            workload = await client.create(workloads.workloads_path(mesh.namespace), body)
        except kubeclient.ApiError as e:
            if e.not_found:
                raise KueueNotServed(
                    f"the mesh is labelled {workloads.QUEUE_NAME_LABEL}={queue} but the cluster "
                    f"serves no {workloads.GROUP}/{workloads.VERSION} Workloads: install Kueue "
                    f"(v0.17 or later), or delete the mesh and create it again without the "
                    f"label (the label cannot change once the mesh exists)") from e
            if not e.conflict:
                raise
            workload = await client.get(path)
    if not workloads.read(workload).reserved:
        workload = await _keep_demand(client, mesh, queue, path, workload, settings)
    active = not mesh.suspend
    if bool((workload.get("spec") or {}).get("active", True)) != active \
            and not (workloads.deactivated_by_kueue(workload) if active
                     else workloads.deactivating(workload)):  # Kueue's decision stands, and its write
        workload = await client.merge_patch(path, workloads.active_patch(active))
    if (reactivation := workloads.reactivation_patch(workload, _now())) is not None:
        workload = await client.merge_patch(
            workloads.workloads_path(mesh.namespace, workloads.workload_name(mesh), status=True),
            reactivation)
    verdict = workloads.read(workload)
    if verdict.state == workloads.STATE_ADMITTED and len(pods) < mesh.size:
        flavors = [await client.get(f"/apis/{workloads.GROUP}/{workloads.VERSION}/resourceflavors/{f}")
                   for f in workloads.assigned_flavors(workload)]
        verdict = dataclasses.replace(verdict, flavors=tuple(flavors))
    if verdict.state == workloads.STATE_EVICTED and verdict.reserved and not pods:
        workload = await client.merge_patch(
            workloads.workloads_path(mesh.namespace, workloads.workload_name(mesh), status=True),
            workloads.release_patch(workload, _now()))
    return dataclasses.replace(verdict, workload=workload)


async def report_readiness(client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                           admission: workloads.Admission, ready: int) -> None:
    """Keep the Workload's PodsReady condition (:func:`workloads.pods_ready`), as Kueue's own
    job controllers do, with ``ready`` procs of the mesh ready now: without it Kueue's
    waitForPodsReady evicted every admitted mesh at its timeout, Ready or not, and with it a
    mesh admitted but never placed is evicted and gives its quota back."""
    workload = admission.workload
    if workload is None:
        return
    admitted = admission.state == workloads.STATE_ADMITTED
    condition = workloads.pods_ready((workload.get("status") or {}).get("conditions"), admitted, ready, mesh.size)
    if condition is None:
        return
    try:
        await client.merge_patch(
            workloads.workloads_path(mesh.namespace, workloads.workload_name(mesh), status=True),
            workloads.pods_ready_patch(workload, condition, _now()))
    except kubeclient.ApiError as e:
        if not (e.conflict or e.not_found):
            raise
        # Kueue wrote it meanwhile (or it is gone): its event brings the mesh back to look again.


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
