"""The process node as a DRA driver: the kubelet plugin of NVIDIA's ``gpu.nvidia.com`` driver.

:func:`slice_object` renders the node's ResourceSlice the way the NVIDIA DRA GPU driver
publishes it (one pool named after the node, one device ``gpu-<minor>`` per GPU with the
driver's attributes and its ``memory`` capacity; docs/dra.md cites the driver's source), and
:func:`publish` creates or replaces it with the node's own credentials (the Node authorizer and
NodeRestriction allow a node the slices of its own name). The kube-scheduler's real allocator
picks devices from it. When a pod with claims starts, :func:`claimed_devices` is the driver's
NodePrepareResources: it reads each claim the container uses, checks that it is allocated on
this node and reserved for the pod, and returns exactly the allocated devices, which
:mod:`.pods` exposes as the driver's CDI spec would (NVIDIA_VISIBLE_DEVICES set by the node, so
the emulated runtime of :mod:`.gpus` shows only them). Used by :mod:`.agent` and :mod:`.pods`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.cluster.process_node import api as api_mod
from tests.cluster.process_node import gpus
from tests.cluster.process_node.config import NodeConfig

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
#: What the emulated devices report where the driver would ask NVML (an H200 and its stack).
ARCHITECTURE = "Hopper"
CUDA_COMPUTE_CAPABILITY = "9.0.0"
DRIVER_VERSION = "570.124.6"
CUDA_DRIVER_VERSION = "12.8.0"


def device_name(device: gpus.Device) -> str:
    """The driver's canonical name of a full GPU: ``gpu-<minor>`` (minor = node index here)."""
    return f"gpu-{device.index}"


def slice_name(config: NodeConfig) -> str:
    return f"{config.name}-{DRIVER}"


def slice_object(config: NodeConfig, devices: list[gpus.Device], node_uid: str) -> Obj:
    """The node's ResourceSlice: driver, pool (the node's name), and one device per GPU."""
    published = []
    for device in devices:
        published.append({
            "name": device_name(device),
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": device.uuid},
                "productName": {"string": config.gpu_product.replace("-", " ")},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": ARCHITECTURE},
                "cudaComputeCapability": {"version": CUDA_COMPUTE_CAPABILITY},
                "driverVersion": {"version": DRIVER_VERSION},
                "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
            },
            "capacity": {"memory": {"value": f"{config.gpu_memory_mib}Mi"}},
        })
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": slice_name(config), "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": config.name, "uid": node_uid,
             "controller": True}]},
        "spec": {"driver": DRIVER, "nodeName": config.name,
                 "pool": {"name": config.name, "generation": 1, "resourceSliceCount": 1},
                 "devices": published},
    }


def publish(api: api_mod.Api, config: NodeConfig, devices: list[gpus.Device], node_uid: str) -> None:
    """Create the node's slice, or replace one left by an earlier run of this node."""
    body = slice_object(config, devices, node_uid)
    try:
        api.create(SLICES_PATH, body)
        return
    except api_mod.ApiError as error:
        if error.status != 409:
            raise
    existing = api.get(f"{SLICES_PATH}/{slice_name(config)}")
    pool = dict(body["spec"]["pool"])
    pool["generation"] = int(((existing.get("spec") or {}).get("pool") or {}).get("generation", 0)) + 1
    body["spec"]["pool"] = pool
    body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    api.request("PUT", f"{SLICES_PATH}/{slice_name(config)}", body=body)


class ClaimError(gpus.DeviceError):
    """A claim the container uses is missing, not allocated here, or not reserved for the pod."""


def _claim_name(pod: Obj, reference: Obj) -> str | None:
    if reference.get("resourceClaimName"):
        return str(reference["resourceClaimName"])
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if entry.get("name") == reference.get("name"):
            return entry.get("resourceClaimName")  # type: ignore[no-any-return]
    return None


def claimed_devices(pod: Obj, container: Obj, node: str, devices: list[gpus.Device],
                    get_claim: Callable[[str, str], Obj | None]) -> list[gpus.Device] | None:
    """The devices of this driver allocated to ``container``'s claims, or None if it uses none.

    ``get_claim(namespace, name)`` reads a ResourceClaim (None: absent). Raises :class:`ClaimError` (the
    container waits, as when the kubelet's prepare fails) when a claim is not ready for the pod.
    """
    uses = (container.get("resources") or {}).get("claims") or []
    if not uses:
        return None
    references = {r.get("name"): r for r in (pod.get("spec") or {}).get("resourceClaims") or []}
    by_name = {device_name(d): d for d in devices}
    namespace, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
    chosen: list[gpus.Device] = []
    for use in uses:
        reference = references.get(use.get("name"))
        name = _claim_name(pod, reference) if reference else None
        if name is None:
            raise ClaimError(f"claim {use.get('name')!r} has no ResourceClaim yet")
        claim = get_claim(namespace, name)
        if claim is None:
            raise ClaimError(f"ResourceClaim {name} does not exist")
        status = claim.get("status") or {}
        if not any(r.get("uid") == uid for r in status.get("reservedFor") or []):
            raise ClaimError(f"ResourceClaim {name} is not reserved for this pod")
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for result in results:
            if result.get("driver") != DRIVER:
                continue
            if use.get("request") and result.get("request") != use["request"]:
                continue
            device = by_name.get(str(result.get("device")))
            if result.get("pool") != node or device is None:
                raise ClaimError(f"ResourceClaim {name}: device {result.get('pool')}/"
                                 f"{result.get('device')} is not on node {node}")
            if device not in chosen:
                chosen.append(device)
    return chosen
