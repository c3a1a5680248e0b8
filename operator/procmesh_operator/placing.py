"""Where each proc runs: its node (colocation, pinned hosts) and, in pinned mode, its device.

Pure. :mod:`.planning` calls :func:`place` for the ranks it is about to create, with what the
reconciler observed (the mesh's own pods, the colocated mesh and its pods, nodes, and every other
proc pod that pins a device); the result feeds :func:`procmesh_operator.rendering.render_pod`.

* none / plugin mode: the scheduler picks (plugin mode: the device plugin picks the GPU).
* colocateWith: the proc at point p goes to the node of the other mesh's proc at p (in pinned
  mode, to its device too), so the other mesh's proc must be scheduled first.
* dra mode: the kube-scheduler places (a co-located mesh shares its partner's claims, so no
  waiting for the partner); :mod:`.planning` calls :mod:`.claim_budgets` instead of
  :func:`place`, after :func:`check_colocation`.
* pinned mode otherwise: the operator picks one node per host index (first fit by name, among
  Ready, uncordoned GPU nodes that match template.nodeSelector and its required node affinity,
  whose NoSchedule/NoExecute taints the pods tolerate, and where the budget fits), so that it
  can check devices and budgets before any pod exists; a node other than any other host's
  unless spec.placement.hosts is Any (:mod:`.spreading` does the rest for the modes the
  scheduler places). Node terms, cordons and taints are judged as :mod:`.fitting` judges them,
  with the pods' own tolerations (:func:`rendering.pod_tolerations`: a Kueue flavor's
  included); a node kept off only by a cordon or a taint is waited for, as one not Ready. A
  host's later procs (a restart) go to the node its running procs are on, and wait while that
  node cannot take them (:func:`_unfit_host_node`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import budgets, dimensions, fitting, losses, rendering, specs
from procmesh_operator import settings as settings_

GFD_COUNT_LABEL = "nvidia.com/gpu.count"
GFD_MEMORY_LABEL = "nvidia.com/gpu.memory"

# Reasons of a refused placement (see statuses.py for their conditions).


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What placement needs to know about a node."""

    name: str
    labels: Mapping[str, str]
    gpu_count: int
    gpu_memory_mib: int | None
    ready: bool
    unschedulable: bool = False  # cordoned
    taints: tuple[Mapping[str, Any], ...] = ()

    def unfit(self, tolerations: Sequence[Mapping[str, Any]]) -> str | None:
        """Why pods with ``tolerations`` may not go here now (:func:`fitting.unfit`), or None."""
        return fitting.unfit(tolerations, self.taints, ready=self.ready,
                             unschedulable=self.unschedulable)


def node_info(node: Mapping[str, Any], resource_name: str = "nvidia.com/gpu") -> NodeInfo:
    """Read a Node object: GFD labels first, then the device plugin's capacity."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    labels = meta.get("labels") or {}
    count = labels.get(GFD_COUNT_LABEL) or (status.get("capacity") or {}).get(resource_name) or 0
    memory = labels.get(GFD_MEMORY_LABEL)
    return NodeInfo(
        name=str(meta.get("name", "")),
        labels=labels,
        gpu_count=_int(count),
        gpu_memory_mib=_int(memory) if memory is not None else None,
        ready=losses.is_ready(node),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        taints=tuple((node.get("spec") or {}).get("taints") or ()),
    )


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Placement is impossible as specified, or not yet: a reason (CamelCase) and a message
    naming the fix, or what it waits for."""

    reason: str
    message: str

    @property
    def waits(self) -> bool:
        """The refusal clears without a change to this mesh (room frees on a device, a node
        joins, the colocated mesh is created), and the mesh is placed then: its reason is one of
        :data:`contract.WAITING_REASONS`, which the status and the client read as a wait."""
        return self.reason in contract.WAITING_REASONS


@dataclasses.dataclass(frozen=True)
class Placement:
    """The outcome: placements for the requested ranks, or why not (refused or waiting)."""

    procs: Mapping[int, rendering.ProcPlacement] = dataclasses.field(default_factory=dict)
    refusal: Refusal | None = None
    waiting: str | None = None  # a message: what must happen first (e.g. partner scheduling)


def pod_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod runs on, or the node the operator pinned it to before scheduling."""
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return spec.get("nodeName") or annotations.get(contract.NODE_ANNOTATION)


def is_live(pod: Mapping[str, Any]) -> bool:
    """A pod that is (or will be) its rank's proc: not terminating and not finished."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded")


def holds_device(pod: Mapping[str, Any]) -> bool:
    """A pod whose proc may still hold memory on its device: not finished. A terminating pod's
    proc runs through its grace period and holds its memory until it exits, so its budget is
    free only once the pod is gone (as the kube-scheduler counts a terminating pod's resources
    on its node until it is deleted); the DELETED event wakes meshes waiting for the room."""
    return (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded")


def device_uses(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[budgets.DeviceUse]]:
    """Group the pinned proc pods that hold their device (:func:`holds_device`) by ``(node,
    device)`` from their annotations; callers pass the mesh's own pods filtered by
    :func:`is_live` (a terminating one of its own is replaced only once it is gone)."""
    out: dict[tuple[str, str], list[budgets.DeviceUse]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        device = annotations.get(contract.GPU_DEVICE_ANNOTATION)
        node = pod_node(pod)
        if device is None or node is None or not holds_device(pod):
            continue
        raw = annotations.get(contract.MEMORY_FRACTION_ANNOTATION)
        fraction = float(raw) if raw is not None else None
        out.setdefault((node, device), []).append(budgets.DeviceUse(str(meta.get("name")), fraction))
    return out


def shape_text(shape: dimensions.Dimensions) -> str:
    """``hosts=2 x gpus=4``: a shape as the CLI writes it, for messages."""
    return " x ".join(f"{name}={size}" for name, size in shape.dims)


def ids_text(ids: Sequence[str] | None) -> str:
    """``0, 1``: device IDs for messages (``none`` for an empty or missing list)."""
    return ", ".join(str(i) for i in ids) if ids else "none"


#: The end of a refusal whose fix is in a field that cannot change once the mesh exists.
RECREATE = "spec.colocateWith and spec.gpus cannot change once a mesh exists"


def check_colocation(mesh: specs.MeshSpec, partner: specs.MeshSpec | None,
                     chain: Sequence[str] = ()) -> Refusal | None:
    """What the API server cannot judge about colocateWith: existence, cycles, shape and GPU
    mode. Only a missing partner waits (it may be created); the others are fixed by deleting a
    mesh and creating it again, as its colocateWith and gpus cannot change. ``chain``: the
    meshes named by following colocateWith on from the partner (its colocateWith first), as far
    as they exist, for cycles through other meshes."""
    if mesh.colocate_with is None:
        return None
    if partner is None:
        return Refusal(contract.WAITING_FOR_COLOCATED,
                       f"spec.colocateWith names ProcMesh {mesh.colocate_with}, which does not "
                       f"exist in namespace {mesh.namespace}; this mesh is placed once it is "
                       f"created (to colocate with another mesh, delete this one and create it "
                       f"again: {RECREATE})")
    cycle = colocation_cycle(mesh.name, partner.name,
                             chain or ([partner.colocate_with] if partner.colocate_with else []))
    if cycle is not None and cycle[0] == mesh.name:
        return Refusal(contract.INVALID_COLOCATION,
                       f"spec.colocateWith: ProcMesh {partner.name} is colocated with this mesh "
                       f"through colocateWith, a cycle ({' -> '.join(cycle)}): each waits for "
                       f"the next one's procs to be scheduled, so none can be placed; delete one "
                       f"of them and create it again without colocateWith ({RECREATE})")
    if cycle is not None:
        return Refusal(contract.INVALID_COLOCATION,
                       f"spec.colocateWith: ProcMesh {partner.name} is colocated, through "
                       f"colocateWith, with a cycle of meshes ({' -> '.join(cycle)}) that none "
                       f"can be placed in, so neither can this mesh; delete one of them and "
                       f"create it again without colocateWith ({RECREATE})")
    if partner.shape.sizes != mesh.shape.sizes:
        return Refusal(contract.INVALID_COLOCATION,
                       f"spec.colocateWith: ProcMesh {partner.name} has shape "
                       f"{shape_text(partner.shape)}, this mesh has {shape_text(mesh.shape)}; "
                       f"colocated meshes need the same hosts and perHost sizes: delete one of "
                       f"them and create it again with the other's shape")
    for shared in (contract.GPU_MODE_PINNED, contract.GPU_MODE_DRA):
        if (mesh.gpus.mode == shared) != (partner.gpus.mode == shared):
            return Refusal(contract.INVALID_COLOCATION,
                           f"spec.colocateWith: this mesh has gpus.mode {mesh.gpus.mode} and "
                           f"ProcMesh {partner.name} has {partner.gpus.mode}; sharing a {shared} "
                           f"device needs both meshes in {shared} mode: delete one of them and "
                           f"create it again in the other's mode ({RECREATE})")
    if mesh.gpus.mode == contract.GPU_MODE_DRA and partner.colocate_with is not None:
        return Refusal(contract.INVALID_COLOCATION,
                       f"spec.colocateWith: ProcMesh {partner.name} is itself colocated with "
                       f"{partner.colocate_with}; in dra mode colocate with the mesh that owns "
                       f"the claims: delete this mesh and create it again with colocateWith "
                       f"{partner.colocate_with} ({RECREATE})")
    if mesh.gpus.mode == contract.GPU_MODE_PINNED and mesh.gpus.device_ids is not None \
            and mesh.gpus.device_ids != partner.gpus.device_ids:
        return Refusal(contract.INVALID_COLOCATION,
                       f"spec.gpus.deviceIDs are {ids_text(mesh.gpus.device_ids)} and differ "
                       f"from those of ProcMesh {partner.name}, {ids_text(partner.gpus.device_ids)}; "
                       f"a colocated pinned mesh shares its partner's devices: delete this mesh "
                       f"and create it again without deviceIDs (it then uses its partner's) or "
                       f"with the same ones ({RECREATE})")
    return None


def colocation_cycle(name: str, partner: str, chain: Sequence[str]) -> list[str] | None:
    """The cycle in the colocateWith path ``name -> partner -> *chain``, from its first mesh
    back to it (``["a", "b", "a"]``), or None when the path ends without coming back."""
    path = [name, partner, *chain]
    for i, step in enumerate(path):
        if step in path[:i]:
            return path[path.index(step):i + 1]
    return None


def device_for(mesh: specs.MeshSpec, rank: int, partner: specs.MeshSpec | None) -> str | None:
    """The physical device of ``rank`` in pinned mode (one per local index, every host)."""
    if mesh.gpus.mode != contract.GPU_MODE_PINNED:
        return None
    ids = mesh.gpus.device_ids
    if ids is None and partner is not None:
        ids = partner.gpus.device_ids
    if not ids:
        return None
    return ids[mesh.shape.local_index(rank)]


def staying_meshes(mesh: specs.MeshSpec) -> tuple[str, ...]:
    """The meshes whose procs stay on a device as long as ``mesh`` does: itself and the mesh it
    is colocated with (:func:`budgets.overrun_reason`: room they take is no wait)."""
    return (mesh.name,) if mesh.colocate_with is None else (mesh.name, mesh.colocate_with)


def _fits_on(node: NodeInfo, wanted: Mapping[str, list[budgets.DeviceUse]],
             uses: Mapping[tuple[str, str], list[budgets.DeviceUse]],
             settings: settings_.Settings, staying: Sequence[str]) -> Refusal | None:
    """Can ``node`` take the procs in ``wanted`` (device -> new uses) on top of ``uses``?
    ``staying``: :func:`staying_meshes` of the mesh placed."""
    memory = node.gpu_memory_mib or settings.default_gpu_memory_mib
    for device in sorted(wanted):
        if device.isdigit() and int(device) >= node.gpu_count:
            return Refusal(contract.DEVICE_NOT_FOUND,
                           f"GPU {device} does not exist on node {node.name}, which has "
                           f"{node.gpu_count} GPU(s); list devices 0..{node.gpu_count - 1}")
    for device, new in sorted(wanted.items()):
        together = list(uses.get((node.name, device), [])) + new
        if budgets.overflow_mib(together, memory, settings.cuda_context_mib) > 0:
            return Refusal(
                budgets.overrun_reason(together, memory, settings.cuda_context_mib, staying),
                budgets.explain_overrun(device, node.name, together, memory,
                                        settings.cuda_context_mib, staying))
    return None


def place(mesh: specs.MeshSpec, ranks: Sequence[int], *,
          own_pods: Mapping[int, Mapping[str, Any]],
          partner: specs.MeshSpec | None,
          partner_pods: Mapping[int, Mapping[str, Any]],
          nodes: Mapping[str, NodeInfo],
          other_pods: Iterable[Mapping[str, Any]],
          settings: settings_.Settings,
          colocation_chain: Sequence[str] = ()) -> Placement:
    """Place ``ranks`` of ``mesh`` (see the module docstring for the rules).

    ``own_pods`` and ``partner_pods`` are keyed by rank; ``other_pods`` are all other proc pods
    the operator knows (any mesh), read for the devices they pin; ``nodes`` by name (needed in
    pinned mode only); ``colocation_chain`` as for :func:`check_colocation`."""
    refusal = check_colocation(mesh, partner, colocation_chain)
    if refusal is not None:
        return Placement(refusal=refusal)
    if not ranks:
        return Placement()
    pinned = mesh.gpus.mode == contract.GPU_MODE_PINNED
    fraction = mesh.gpus.memory_fraction

    if mesh.colocate_with is not None:
        out: dict[int, rendering.ProcPlacement] = {}
        for rank in ranks:
            pod = partner_pods.get(rank)
            node = (pod.get("spec") or {}).get("nodeName") if pod and is_live(pod) else None
            if node is None:
                return Placement(waiting=f"waiting for {contract.pod_name(mesh.colocate_with, rank)} "
                                            f"of ProcMesh {mesh.colocate_with!r} to be scheduled")
            out[rank] = rendering.ProcPlacement(node=node, device=device_for(mesh, rank, partner))
        if pinned:
            uses = device_uses([*other_pods, *(p for p in own_pods.values() if is_live(p))])
            by_node: dict[str, dict[str, list[budgets.DeviceUse]]] = {}
            for rank, p in out.items():
                by_node.setdefault(str(p.node), {}).setdefault(str(p.device), []).append(
                    budgets.DeviceUse(contract.pod_name(mesh.name, rank), fraction))
            for node_name, wanted in sorted(by_node.items()):
                refusal = _check_node(nodes, node_name, "the colocated procs", wanted, uses,
                                      settings, staying_meshes(mesh)) \
                    or _check_colocated_pods(mesh, nodes.get(node_name), settings)
                if refusal is not None:
                    return Placement(refusal=refusal)
        return Placement(procs=out)

    if not pinned:
        return Placement(procs={rank: rendering.ProcPlacement() for rank in ranks})
    return _place_pinned_hosts(mesh, ranks, own_pods, nodes, other_pods, settings)


def _check_colocated_pods(mesh: specs.MeshSpec, node: NodeInfo | None,
                          settings: settings_.Settings) -> Refusal | None:
    """Refuse if this colocated mesh's own pods may not go to ``node``, where its partner's run
    (its template's nodeSelector, required node affinity or tolerations differ from the
    partner's, or the node is no longer Ready or is cordoned since the partner went there): they
    would sit Unschedulable there. A taint, a cordon or readiness waits (the node's change wakes
    the mesh, :mod:`.reconciling`); the template's terms need an edit of this mesh."""
    if node is None:
        return None
    if not fitting.node_matches(mesh.template, node.labels, node.name):
        return Refusal(contract.NO_NODE_FITS, (
            f"the colocated procs must run on node {node.name}, beside ProcMesh "
            f"{mesh.colocate_with!r}'s, which this mesh's spec.template.nodeSelector or required "
            "node affinity rules out: give this mesh the same node terms as its partner"))
    tolerations, _ = rendering.pod_tolerations(mesh, settings)
    taint = fitting.untolerated(tolerations, node.taints)
    if taint is not None:
        return Refusal(contract.WAITING_FOR_NODE, (
            f"the colocated procs must run on node {node.name}, beside ProcMesh "
            f"{mesh.colocate_with!r}'s, whose {taint.removeprefix('untolerated ')} this mesh's "
            "pods do not tolerate: add the partner's toleration to this mesh's "
            "spec.template.tolerations (or lift the taint)"))
    unfit = node.unfit(tolerations)  # not Ready, or cordoned, since the partner went there
    if unfit is not None:
        return Refusal(contract.WAITING_FOR_NODE, (
            f"the colocated procs must run on node {node.name}, beside ProcMesh "
            f"{mesh.colocate_with!r}'s, which is {unfit} now: they wait for it"))
    return None


def _check_node(nodes: Mapping[str, NodeInfo], node_name: str, whose: str,
                wanted: Mapping[str, list[budgets.DeviceUse]],
                uses: Mapping[tuple[str, str], list[budgets.DeviceUse]],
                settings: settings_.Settings, staying: Sequence[str]) -> Refusal | None:
    """Refuse if the node already chosen for ``whose`` is gone or its devices cannot take ``wanted``."""
    node = nodes.get(node_name)
    if node is None:
        # Its procs are lost with it and placed again (:mod:`.losses`): this waits.
        return Refusal(contract.WAITING_FOR_NODE, f"node {node_name} of {whose} is not found; "
                                                  f"its procs are placed again once they are gone")
    return _fits_on(node, wanted, uses, settings, staying)


def _unfit_host_node(node: NodeInfo | None, host: int,
                     tolerations: Sequence[Mapping[str, Any]]) -> Refusal | None:
    """Wait if the node of ``host``, where procs of it still run, cannot take its new procs now
    (no longer Ready, cordoned or tainted since the host was placed): they would sit Pending
    there, and they go to no other node, as a host is one machine (its procs share a node, and
    in a colocated pair their partners' devices). The node's change wakes the mesh
    (:mod:`.reconciling`); once none of the host's procs is left (drained, evicted by a NoExecute
    taint, lost with the node), the host is placed anew."""
    unfit = node.unfit(tolerations) if node is not None else None
    if node is None or unfit is None:
        return None
    return Refusal(contract.WAITING_FOR_NODE, (
        f"host {host}'s new procs wait for its node {node.name}, where its other procs run: "
        f"{unfit} (a host is one machine: it is placed anew only once none of its procs is "
        "left)"))


def _place_pinned_hosts(mesh: specs.MeshSpec, ranks: Sequence[int],
                        own_pods: Mapping[int, Mapping[str, Any]],
                        nodes: Mapping[str, NodeInfo],
                        other_pods: Iterable[Mapping[str, Any]],
                        settings: settings_.Settings) -> Placement:
    shape = mesh.shape
    fraction = mesh.gpus.memory_fraction
    own_live = {r: p for r, p in own_pods.items() if is_live(p)}
    uses = device_uses([*other_pods, *own_live.values()])
    host_nodes: dict[int, str] = {}
    for rank, pod in own_live.items():
        node_name = pod_node(pod)
        if node_name is not None:
            host_nodes.setdefault(shape.host_of(rank), node_name)
    wanted_by_host: dict[int, dict[str, list[budgets.DeviceUse]]] = {}
    for rank in ranks:
        device = device_for(mesh, rank, None)
        wanted_by_host.setdefault(shape.host_of(rank), {}).setdefault(str(device), []).append(
            budgets.DeviceUse(contract.pod_name(mesh.name, rank), fraction))
    tolerations, _ = rendering.pod_tolerations(mesh, settings)
    for host, wanted in sorted(wanted_by_host.items()):
        if host in host_nodes:
            refusal = _check_node(nodes, host_nodes[host], f"host {host}", wanted, uses, settings,
                                  staying_meshes(mesh))
            if refusal is None or refusal.waits:  # (a node that could never take them: no wait)
                refusal = _unfit_host_node(nodes.get(host_nodes[host]), host, tolerations) \
                    or refusal
            if refusal is not None:
                return Placement(refusal=refusal)
        else:
            # Hosts are machines unless spec.placement.hosts says Any (budgets still apply).
            taken = {n: h for h, n in host_nodes.items()} if mesh.hosts_on_distinct_nodes else {}
            reasons: list[str] = []
            node_may_come = not nodes  # a node may join an empty cluster, or come back
            room_may_free = False
            for node in sorted(nodes.values(), key=lambda n: n.name):
                if node.name in taken:
                    reasons.append(f"{node.name}: runs host {taken[node.name]} of this mesh "
                                   f"(spec.placement.hosts {contract.HOSTS_ON_DISTINCT_NODES})")
                    continue
                if not fitting.node_matches(mesh.template, node.labels, node.name):
                    reasons.append(f"{node.name}: does not match template.nodeSelector or its required "
                                   "node affinity")
                    continue
                if node.gpu_count == 0:
                    reasons.append(f"{node.name}: has no GPUs")
                    continue
                refusal = _fits_on(node, wanted, uses, settings, staying_meshes(mesh))
                blocked = node.unfit(tolerations)
                if blocked is not None:  # worth waiting for if it could take the host once back
                    if refusal is None or refusal.waits:  # (or untainted, or tolerated)
                        reasons.append(f"{node.name}: {blocked}")
                        node_may_come = True
                    else:
                        reasons.append(refusal.message)
                    continue
                if refusal is not None:
                    reasons.append(refusal.message)
                    room_may_free = room_may_free or refusal.waits
                    continue
                host_nodes[host] = node.name
                break
            else:
                detail = "; ".join(reasons) or "the cluster has no nodes"
                # A pinned mesh that no node takes creates no pods, so no autoscaler adds a node
                # for it: it waits only for what comes by itself (room, a node back or joining
                # an empty cluster); what no node, ready or not, can ever take is refused.
                reason = contract.WAITING_FOR_GPU_BUDGET if room_may_free else \
                    contract.WAITING_FOR_NODE if node_may_come else contract.NO_NODE_FITS
                return Placement(refusal=Refusal(
                    reason, f"no node can take host {host} of this pinned mesh (devices "
                            f"{ids_text(sorted(wanted))})"
                            f"{' now' if reason != contract.NO_NODE_FITS else ''}: {detail}"))
        for device, new in wanted.items():
            uses.setdefault((host_nodes[host], device), []).extend(new)
    return Placement(procs={
        rank: rendering.ProcPlacement(node=host_nodes[shape.host_of(rank)],
                                      device=device_for(mesh, rank, None))
        for rank in ranks})
