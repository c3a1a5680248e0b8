"""Meshes made by an older operator: render their replacement pods as their existing pods are.

``spec.placement`` came after the first meshes. The API server fills a missing field with the
CRD default on every read, so a mesh created before it reads as ``hosts: DistinctNodes`` although
its pods were rendered without any host spreading (as ``Any`` renders now). Rendering a restarted
proc's pod with the anti-affinity could leave it Pending for ever beside its own mesh's pods on a
shared node. So the reconcile (:mod:`.reconciling`) asks :func:`as_rendered` first: while a
DistinctNodes mesh still has pods, and they show that they were placed without host spreading (no
inter-pod term of :mod:`.spreading` on a pod that should carry one; in pinned mode, two hosts on
one node), the mesh is handled as ``Any``. The first time it is, the reconcile writes what
:func:`to_record` says into ``status.renderedHostPlacement``, so that once none of its pods
remain (RestartMesh, a resume) the mesh is still rendered as before, not by the spec it reads
as. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import specs, spreading

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
#: The status field that keeps the host placement pods are rendered with, where it differs
#: from ``spec.placement.hosts`` (only meshes from before that field).
RENDERED_FIELD = "renderedHostPlacement"


def _carries(pod: Mapping[str, Any], kind: str, mesh: str) -> bool:
    """Whether ``pod`` has a required ``kind`` term that selects pods of ``mesh``."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    for term in affinity.get(_REQUIRED) or []:
        selector = term.get("labelSelector") or {}
        if (selector.get("matchLabels") or {}).get(contract.MESH_LABEL) == mesh:
            return True
        for expression in selector.get("matchExpressions") or []:
            if expression.get("key") == contract.MESH_LABEL and mesh in (expression.get("values") or []):
                return True
    return False


def spread_when_rendered(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]]) -> bool:
    """Whether the existing ``pods`` of a DistinctNodes ``mesh`` were placed with its hosts on
    distinct nodes (True when they cannot tell)."""
    kinds = spreading.affinity_kinds(mesh)  # the same for every rank
    for pod in pods.values():
        for kind in kinds:
            if not _carries(pod, kind, mesh.name):
                return False
    if mesh.gpus.mode == contract.GPU_MODE_PINNED and mesh.colocate_with is None:
        hosts_of_node: dict[str, int] = {}
        for rank, pod in pods.items():
            node = ((pod.get("metadata") or {}).get("annotations") or {}).get(contract.NODE_ANNOTATION) \
                or (pod.get("spec") or {}).get("nodeName")
            if node and hosts_of_node.setdefault(node, mesh.shape.host_of(rank)) != mesh.shape.host_of(rank):
                return False
    return True


def as_rendered(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]],
                recorded: str | None = None) -> specs.MeshSpec:
    """``mesh`` with the host placement its existing ``pods`` were rendered with, or the one
    ``recorded`` in ``status.renderedHostPlacement`` (which outlives the pods)."""
    if not mesh.hosts_on_distinct_nodes:
        return mesh
    if recorded == contract.HOSTS_ON_ANY_NODES or (pods and not spread_when_rendered(mesh, pods)):
        return dataclasses.replace(mesh, host_placement=contract.HOSTS_ON_ANY_NODES)
    return mesh


def to_record(mesh: specs.MeshSpec, rendered: specs.MeshSpec, recorded: str | None) -> str | None:
    """What ``status.renderedHostPlacement`` must newly say (None: nothing to write)."""
    if rendered.host_placement != mesh.host_placement and recorded != rendered.host_placement:
        return rendered.host_placement
    return None
