"""Hosts are machines: the pod (anti-)affinity that puts each host of a mesh on a node of its own.

Pure. :func:`procmesh_operator.rendering.render_pod` merges :func:`pod_affinity` into the pod's
affinity; :mod:`.placing` reads :attr:`~procmesh_operator.specs.MeshSpec.hosts_on_distinct_nodes`
for pinned meshes, whose nodes it picks itself.

Monarch users read a host as a machine, so by default (``spec.placement.hosts: DistinctNodes``):

* no two hosts of a mesh share a node: a required pod anti-affinity on
  ``kubernetes.io/hostname`` against the pods of the *same* mesh with a *different* host index
  (so it never repels another mesh, e.g. one colocated beside this one);
* the procs of one host share a node: in none and plugin mode a required pod affinity to the
  pods of the same mesh and host index (the first one placed goes where the scheduler likes, the
  rest follow it). In dra mode the host's shared ResourceClaim already binds its procs to one
  node, and in pinned mode :mod:`.placing` picks one node per host, so neither needs it.

A topology spread constraint cannot say this: with ``maxSkew: 1`` it also spreads the procs of
one host, and with one node (one topology domain) it is always satisfied, so two hosts would
share it instead of waiting for a second node.

Pinned meshes get no terms: the operator chooses their nodes (distinct ones per host) before the
pods exist, so it can check devices and budgets. A colocated mesh gets no terms either: each
proc follows its partner's proc at the same point (the partner's hosts are spread, or not, by
the partner's own spec.placement), and terms of its own could only contradict that.
``Any`` renders nothing: the scheduler places each proc alone, as before this module existed.
"""

from __future__ import annotations

from typing import Any

from mesh_client._src import contract
from procmesh_operator import names, specs

HOSTNAME_TOPOLOGY_KEY = names.HOSTNAME_LABEL

_SCHEDULER_PLACED = (contract.GPU_MODE_NONE, contract.GPU_MODE_PLUGIN, contract.GPU_MODE_DRA)


def _host_label() -> str:
    return contract.coord_label(contract.HOSTS_DIM)


def affinity_kinds(mesh: specs.MeshSpec) -> tuple[str, ...]:
    """The kinds of required inter-pod term (``podAntiAffinity``, ``podAffinity``) every pod of
    ``mesh`` carries (the same for each rank; only the terms' host index differs); empty when
    the mesh needs none (see the module docstring)."""
    if not mesh.hosts_on_distinct_nodes or mesh.colocate_with is not None \
            or mesh.gpus.mode not in _SCHEDULER_PLACED:
        return ()
    kinds: tuple[str, ...] = ()
    if mesh.shape.sizes[0] > 1:
        kinds += ("podAntiAffinity",)
    if mesh.size // mesh.shape.sizes[0] > 1 and mesh.gpus.mode != contract.GPU_MODE_DRA:
        kinds += ("podAffinity",)
    return kinds


def pod_affinity(mesh: specs.MeshSpec, rank: int) -> dict[str, list[dict[str, Any]]]:
    """The required inter-pod terms of ``rank``'s pod, by kind (:func:`affinity_kinds`)."""
    kinds = affinity_kinds(mesh)
    if not kinds:
        return {}
    host = str(mesh.shape.host_of(rank))
    out: dict[str, list[dict[str, Any]]] = {}
    if "podAntiAffinity" in kinds:
        out["podAntiAffinity"] = [{
            "labelSelector": {"matchExpressions": [
                {"key": contract.MESH_LABEL, "operator": "In", "values": [mesh.name]},
                {"key": _host_label(), "operator": "NotIn", "values": [host]},
            ]},
            "topologyKey": HOSTNAME_TOPOLOGY_KEY,
        }]
    if "podAffinity" in kinds:
        out["podAffinity"] = [{
            "labelSelector": {"matchLabels": {contract.MESH_LABEL: mesh.name, _host_label(): host}},
            "topologyKey": HOSTNAME_TOPOLOGY_KEY,
        }]
    return out


def merge_into(affinity: dict[str, Any], terms: dict[str, list[dict[str, Any]]]) -> None:
    """Append ``terms`` to the required terms of ``affinity`` (a pod's, user terms kept: all
    required terms must hold at once)."""
    for kind, extra in terms.items():
        section = affinity.setdefault(kind, {})
        required = section.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
        required.extend(extra)
