"""dra mode, the effectful part: create a mesh's ResourceClaims, share them with a co-located
mesh, and read claims and ResourceSlices back for :mod:`.claims`.

Called by :mod:`.reconciling` between the Service and the pods (a pod's claim must exist before
the scheduler can place it). Claims are created once and never updated (their spec is immutable
in the API). A co-located mesh adds itself as a second, non-controller owner of the claims it
shares, so garbage collection deletes a claim only when both meshes are gone: deleting the
partner first leaves the co-located procs their device (docs/dra.md says why).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import claims, kubeclient, rendering, specs

API_PATH = f"/apis/{contract.RESOURCE_API_VERSION}"
SLICES_PATH = f"{API_PATH}/resourceslices"


def claims_path(namespace: str, name: str | None = None) -> str:
    base = f"{API_PATH}/namespaces/{namespace}/resourceclaims"
    return base if name is None else f"{base}/{name}"


class ClaimsNotServed(Exception):
    """The cluster does not serve resource.k8s.io/v1 ResourceClaims."""


class ClaimConflict(Exception):
    """A claim of a derived name exists and belongs to someone else."""


@dataclasses.dataclass(frozen=True)
class ClaimView:
    """The claims of the mesh that owns them (by name) and, once any is allocated, the slices."""

    claims: Mapping[str, Mapping[str, Any]]
    slices: tuple[Mapping[str, Any], ...] = ()

    def gpus_by_rank(self, mesh: specs.MeshSpec) -> dict[int, str]:
        """The allocated device of every rank whose claim request is allocated."""
        out: dict[int, str] = {}
        for rank in range(mesh.size):
            claim, request = claims.slot_of(mesh, rank)
            device = claims.allocated_device(self.claims.get(claim), request)
            if device is not None:
                out[rank] = claims.device_label(self.slices, device)
        return out

    def slot_memory(self) -> dict[tuple[str, str], int]:
        """MiB of every allocated device, by (claim, request)."""
        out: dict[tuple[str, str], int] = {}
        for name, claim in self.claims.items():
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                device = (str(result.get("driver")), str(result.get("pool")),
                          str(result.get("device")))
                memory = claims.device_memory_mib(self.slices, device)
                if memory is not None:
                    out[(name, str(result.get("request")))] = memory
        return out


def _not_served(namespace: str) -> ClaimsNotServed:
    return ClaimsNotServed(
        f"gpus.mode is dra but the cluster does not serve {contract.RESOURCE_API_VERSION} "
        f"resourceclaims in namespace {namespace!r} (Kubernetes 1.34+ with a DRA driver is needed); "
        f"use gpus.mode pinned or plugin on this cluster")


def settled(mesh: specs.MeshSpec, view: ClaimView) -> bool:
    """Whether every claim ``mesh`` uses exists and lists ``mesh`` among its owners."""
    for host in range(mesh.shape.sizes[0]):
        claim = view.claims.get(contract.claim_name(claims.claims_owner(mesh), host))
        owners = ((claim or {}).get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == mesh.uid for o in owners):
            return False
    return True


async def ensure(client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                 partner: specs.MeshSpec | None) -> None:
    """Create the claims of ``mesh`` (or join its partner's claims as an owner)."""
    if mesh.colocate_with is not None:
        if partner is not None:
            await _join(client, mesh, partner)
        return
    owner = rendering.owner_reference(mesh)
    for host in range(mesh.shape.sizes[0]):
        path = claims_path(mesh.namespace, contract.claim_name(mesh.name, host))
        try:
            existing = await client.get_or_none(path)
            if existing is None:
                try:
                    existing = await client.create(claims_path(mesh.namespace),
                                                   claims.render_claim(mesh, host, owner))
                except kubeclient.ApiError as e:
                    if e.not_found:
                        raise _not_served(mesh.namespace) from e
                    if not e.conflict:
                        raise
                    existing = await client.get(path)
        except kubeclient.ApiError as e:
            if e.not_found:
                raise _not_served(mesh.namespace) from e
            raise
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == mesh.uid and o.get("controller") for o in owners):
            raise ClaimConflict(
                f"ResourceClaim {contract.claim_name(mesh.name, host)} exists and is not this "
                f"ProcMesh's: a mesh colocated with an earlier mesh of this name keeps it until "
                f"that mesh is deleted too; delete it (or the claim) or rename this mesh")


async def _join(client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                partner: specs.MeshSpec) -> None:
    """Add ``mesh`` as a non-controller owner of each of its partner's claims."""
    ours = {**rendering.owner_reference(mesh), "controller": False, "blockOwnerDeletion": False}
    for host in range(mesh.shape.sizes[0]):
        path = claims_path(mesh.namespace, contract.claim_name(partner.name, host))
        claim = await client.get_or_none(path)
        if claim is None:
            continue  # the partner's reconcile creates it; the scheduler waits for it
        meta = claim.get("metadata") or {}
        owners = list(meta.get("ownerReferences") or [])
        if any(o.get("uid") == mesh.uid for o in owners):
            continue
        await client.merge_patch(path, {"metadata": {
            "resourceVersion": meta.get("resourceVersion"), "ownerReferences": owners + [ours]}})


class PublishedDevices:
    """What the ResourceSlices last published of each device allocated to a mesh (its UUID, its
    memory), kept while the operator runs: a slice withdrawn under running procs (its driver
    restarting, or gone) leaves their claims allocated, and without this memo the status showed
    ``pool/device`` for the UUID and the budget took ``--default-gpu-memory-mib`` for the
    device's memory until the slice came back. Bounded: the oldest entries go first."""

    LIMIT = 16384

    def __init__(self) -> None:
        self._seen: dict[claims.Device, Mapping[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def fill_in(self, slices: Sequence[Mapping[str, Any]],
                devices: Iterable[claims.Device]) -> tuple[Mapping[str, Any], ...]:
        """``slices``, plus one remembered slice for each of ``devices`` they do not publish
        (now) but published before; each device they do publish is remembered."""
        out = list(slices)
        for device in devices:
            published = claims.slice_device(slices, device)
            if published is not None:
                self._seen.pop(device, None)  # re-inserted last: the newest
                self._seen[device] = published
                while len(self._seen) > self.LIMIT:
                    del self._seen[next(iter(self._seen))]
            elif device in self._seen:
                driver, pool, _ = device
                out.append({"spec": {"driver": driver, "pool": {"name": pool},
                                     "devices": [self._seen[device]]}})
        return tuple(out)


async def observe(client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                  published: PublishedDevices | None = None) -> ClaimView:
    """The claims ``mesh``'s pods use, and the ResourceSlices once any of them is allocated
    (with what ``published`` remembers of a device no slice publishes now)."""
    try:
        listed = await client.list(claims_path(mesh.namespace),
                                   label_selector=contract.mesh_label_selector(
                                       claims.claims_owner(mesh)))
    except kubeclient.ApiError as e:
        if e.not_found:
            raise _not_served(mesh.namespace) from e
        raise
    found = {str((c.get("metadata") or {}).get("name")): c for c in listed.get("items") or []}
    devices = [(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
               for c in found.values()
               for r in (((c.get("status") or {}).get("allocation") or {}).get("devices")
                         or {}).get("results") or []]
    slices: list[Mapping[str, Any]] = []
    for driver in sorted({d[0] for d in devices}):  # only the drivers that hold our devices
        listed_slices = await client.request("GET", SLICES_PATH,
                                             params={"fieldSelector": f"spec.driver={driver}"})
        slices += (listed_slices or {}).get("items") or []
    if published is None:
        return ClaimView(found, tuple(slices))
    return ClaimView(found, published.fill_in(slices, devices))
