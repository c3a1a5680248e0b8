"""dra mode: the ResourceClaims of a mesh, how its pods reference them, and what the API says
about their allocation. Pure.

One claim per host (``<mesh>-gpus-<host>``) with one request per point of the local dimension
(``gpu-<i>``, exactly one device of ``spec.gpus.deviceClassName``): a claim is allocated on one
node, so the procs of a host stay together as in pinned mode, and each request is a distinct
device. A proc's pod references its host's claim and its container that request only; a mesh
with ``colocateWith`` references its partner's claims, so the kube-scheduler's DRA allocator puts
both procs at point p on the same node and device. No logic here picks a device: the scheduler
does, and :func:`allocated_device` reads its decision back from ``status.allocation``.

Used by :mod:`.rendering` (pod references), :mod:`.reconciling` (claims to create),
:mod:`.placing` (the device budget) and :mod:`.statuses` (``status.procs[].gpu`` and
unallocatable claims). Facts about the NVIDIA driver (names, attributes, GpuConfig) are in
docs/dra.md with their sources.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import names, specs

#: The pod-level name of the claim reference in every dra proc pod.
POD_CLAIM_NAME = "gpu"
#: Label on a claim: the host index it serves.
HOST_LABEL = "procmesh.io/host"
#: The NVIDIA driver's opaque configuration type (resource.nvidia.com/v1beta1 GpuConfig).
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
GPU_CONFIG_KIND = "GpuConfig"
#: The NVIDIA driver's attribute with the device's UUID, and its memory capacity.
UUID_ATTRIBUTE = "uuid"
MEMORY_CAPACITY = "memory"


def claims_owner(mesh: specs.MeshSpec) -> str:
    """The mesh whose claims ``mesh``'s pods use: its partner when colocated, else itself."""
    return mesh.colocate_with or mesh.name


def uuid_selector(uuid: str) -> str:
    """The CEL expression that selects the device with this UUID."""
    return f'device.attributes["{contract.DRA_DRIVER}"].{UUID_ATTRIBUTE} == "{uuid}"'


def _request(mesh: specs.MeshSpec, local: int) -> dict[str, Any]:
    expressions = list(mesh.gpus.selectors)
    if mesh.gpus.device_ids:
        expressions.append(uuid_selector(mesh.gpus.device_ids[local]))
    exactly: dict[str, Any] = {"deviceClassName": mesh.gpus.device_class_name,
                               "allocationMode": "ExactCount", "count": 1}
    if expressions:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return {"name": contract.claim_request(local), "exactly": exactly}


def sharing_config(mesh: specs.MeshSpec, requests: list[str]) -> list[dict[str, Any]]:
    """The claim's opaque driver config for ``spec.gpus.sharing`` (none when unset)."""
    if mesh.gpus.sharing_strategy is None:
        return []
    sharing: dict[str, Any] = {"strategy": mesh.gpus.sharing_strategy}
    if mesh.gpus.sharing_interval is not None:
        sharing["timeSlicingConfig"] = {"interval": mesh.gpus.sharing_interval}
    return [{"requests": requests, "opaque": {"driver": contract.DRA_DRIVER, "parameters": {
        "apiVersion": GPU_CONFIG_API_VERSION, "kind": GPU_CONFIG_KIND, "sharing": sharing}}}]


def render_claim(mesh: specs.MeshSpec, host: int, owner: Mapping[str, Any]) -> dict[str, Any]:
    """The ResourceClaim of ``host`` of ``mesh``, owned by ``owner`` (the mesh's reference)."""
    requests = [_request(mesh, i) for i in range(mesh.shape.local_size)]
    devices: dict[str, Any] = {"requests": requests}
    config = sharing_config(mesh, [r["name"] for r in requests])
    if config:
        devices["config"] = config
    return {
        "apiVersion": contract.RESOURCE_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": contract.claim_name(mesh.name, host), "namespace": mesh.namespace,
                     "labels": {**names.mesh_labels(mesh.name), HOST_LABEL: str(host)},
                     "ownerReferences": [dict(owner)]},
        "spec": {"devices": devices},
    }


def pod_claims(mesh: specs.MeshSpec, rank: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's ``spec.resourceClaims`` and the container's ``resources.claims`` for ``rank``."""
    host = mesh.shape.host_of(rank)
    claim = contract.claim_name(claims_owner(mesh), host)
    request = contract.claim_request(mesh.shape.local_index(rank))
    return ([{"name": POD_CLAIM_NAME, "resourceClaimName": claim}],
            [{"name": POD_CLAIM_NAME, "request": request}])


def slot_of(mesh: specs.MeshSpec, rank: int) -> tuple[str, str]:
    """The (claim, request) naming the device of ``rank``."""
    return (contract.claim_name(claims_owner(mesh), mesh.shape.host_of(rank)),
            contract.claim_request(mesh.shape.local_index(rank)))


def pod_slot(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (claim, request) a proc pod's container uses, read from the pod spec, or None."""
    spec = pod.get("spec") or {}
    by_name = {c.get("name"): c.get("resourceClaimName") for c in spec.get("resourceClaims") or []}
    for container in spec.get("containers") or []:
        if container.get("name") != contract.CONTAINER_NAME:
            continue
        for ref in (container.get("resources") or {}).get("claims") or []:
            claim = by_name.get(ref.get("name"))
            if claim and ref.get("request"):
                return str(claim), str(ref["request"])
    return None


# --- What the API says ------------------------------------------------------------------------

Device = tuple[str, str, str]  # (driver, pool, device)


def allocated_device(claim: Mapping[str, Any] | None, request: str) -> Device | None:
    """The device the scheduler allocated for ``request`` of ``claim``, or None (not yet)."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        if result.get("request") == request:
            return str(result.get("driver")), str(result.get("pool")), str(result.get("device"))
    return None


def slice_device(slices: Iterable[Mapping[str, Any]], device: Device) -> Mapping[str, Any] | None:
    """The published device (attributes, capacity) of ``device`` in the ResourceSlices."""
    driver, pool, name = device
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver or (spec.get("pool") or {}).get("name") != pool:
            continue
        for published in spec.get("devices") or []:
            if published.get("name") == name:
                return published  # type: ignore[no-any-return]
    return None


def device_label(slices: Iterable[Mapping[str, Any]], device: Device) -> str:
    """What ``status.procs[].gpu`` shows: the device's UUID attribute, else pool/device."""
    published = slice_device(slices, device) or {}
    attribute = (published.get("attributes") or {}).get(UUID_ATTRIBUTE) or {}
    if attribute.get("string"):
        return str(attribute["string"])
    return f"{device[1]}/{device[2]}"


_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
             "G": 10**9, "T": 10**12}


def quantity_mib(value: str) -> int | None:
    """A Kubernetes quantity (``143771Mi``, ``80Gi``, plain bytes) in MiB; None if unreadable."""
    value = value.strip()
    for suffix, factor in _SUFFIXES.items():
        if value.endswith(suffix) and value[: -len(suffix)].isdigit():
            return int(value[: -len(suffix)]) * factor // 2**20
    return int(value) // 2**20 if value.isdigit() else None


def device_memory_mib(slices: Iterable[Mapping[str, Any]], device: Device) -> int | None:
    """The published memory capacity of ``device`` in MiB, or None."""
    published = slice_device(slices, device) or {}
    capacity = (published.get("capacity") or {}).get(MEMORY_CAPACITY) or {}
    return quantity_mib(str(capacity["value"])) if capacity.get("value") else None


#: What the kube-scheduler's DynamicResources plugin says when no allocation exists for a pod's
#: claims (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go in
#: kubernetes v1.36.5), as opposed to passing states such as "resource claim ... is in the
#: process of being allocated".
UNALLOCATABLE_MESSAGES = ("cannot allocate all claims", "device class")


def unschedulable_claim_message(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's message when it cannot allocate ``pod``'s claims, else None."""
    if (pod.get("spec") or {}).get("nodeName"):
        return None
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" \
                and c.get("reason") == "Unschedulable" \
                and any(m in str(c.get("message")) for m in UNALLOCATABLE_MESSAGES):
            return str(c.get("message"))
    return None


def deleted_claim_message(pod: Mapping[str, Any], claim: Mapping[str, Any] | None,
                          going: Collection[str], owner: str | None = None) -> str | None:
    """Why ``pod`` waits when ``claim``, the one it uses (:func:`slot_of`), is being deleted
    while pods not ending (any but those named in ``going``) still hold it, else None.

    The scheduler places no pod on a claim that has a deletionTimestamp (its PreEnqueue check,
    which shows in the pod's conditions only as ``SchedulingGated``), and the API server keeps
    the claim (the ``resource.kubernetes.io/delete-protection`` finalizer) until no pod is
    reserved for it: so the pod waits for those pods to end, which a running proc's may never
    do. ``owner``: the mesh that owns the claim when it is not the pod's own (colocated)."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("metadata") or {}).get(
            "deletionTimestamp"):
        return None
    if claim is None or not (claim.get("metadata") or {}).get("deletionTimestamp"):
        return None
    holders = sorted(str(r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or []
                     if r.get("resource") == "pods" and r.get("name") not in going)
    if not holders:
        return None  # nothing holds it: the claim goes, and the operator creates it again
    which = "the mesh" if owner is None else f"ProcMesh {owner}, whose claim it is,"
    return (f"its ResourceClaim {(claim.get('metadata') or {}).get('name')} is being deleted "
            f"(by hand?) and stays until the pods that use it end ({', '.join(holders)}); no "
            f"pod is scheduled on it meanwhile. Delete those pods, or suspend and resume "
            f"{which} and the operator creates the claim again")
