"""The pure decision of one reconcile: which pods to delete and create, and what to report.

:mod:`.reconciling` observes (the mesh, its pods, the colocated mesh, nodes, other proc pods),
calls :func:`plan`, carries the plan out in order and hands the plan to
:func:`procmesh_operator.statuses.compute_status`. Nothing here calls the API.

Restart policy (spec.restartPolicy, counted in status.restarts, bounded by spec.maxRestarts):

* ``Never``: a failed proc stays failed; the mesh reports Degraded.
* ``RestartProc``: the failed proc's pod is deleted and recreated under the same name.
* ``RestartMesh``: every pod is deleted, and the mesh is recreated only once all are gone, so no
  proc of attempt N meets one of attempt N-1.

A proc fails when its pod finishes (phase Failed or Succeeded: the proc server exited). A pod
that disappears (deleted by someone) is recreated like a ReplicaSet would, without counting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from procmesh_operator import names, placing, rendering, specs
from procmesh_operator import settings as settings_


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do, and what was found, for one reconcile of one mesh."""

    creates: Mapping[int, rendering.ProcPlacement] = dataclasses.field(default_factory=dict)
    deletes: tuple[tuple[str, str], ...] = ()  # (pod name, uid): delete only that incarnation
    restarts: int = 0  # the new status.restarts
    restarted: tuple[str, ...] = ()  # pods (or the whole mesh) restarted by this plan
    failed: tuple[int, ...] = ()  # ranks whose proc failed and stays failed
    restart_limit_reached: bool = False
    refusal: placing.Refusal | None = None
    waiting: str | None = None


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_failed(pod: Mapping[str, Any]) -> bool:
    return not is_terminating(pod) and pod_phase(pod) in ("Failed", "Succeeded")


def is_ready(pod: Mapping[str, Any]) -> bool:
    if is_terminating(pod) or pod_phase(pod) != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _ident(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("name")), str(meta.get("uid", ""))


def plan(mesh: specs.MeshSpec, *, restarts: int,
         pods: Mapping[int, Mapping[str, Any]],
         partner: specs.MeshSpec | None = None,
         partner_pods: Mapping[int, Mapping[str, Any]] | None = None,
         nodes: Mapping[str, placing.NodeInfo] | None = None,
         other_pods: Iterable[Mapping[str, Any]] = (),
         settings: settings_.Settings) -> Plan:
    """Decide one reconcile of ``mesh``. ``restarts`` is the current status.restarts; ``pods``
    are the mesh's pods by rank (terminating ones included)."""
    if mesh.suspend:
        return Plan(deletes=tuple(_ident(p) for p in pods.values() if not is_terminating(p)),
                    restarts=restarts)

    failed = sorted(rank for rank, pod in pods.items() if is_failed(pod))
    deletes: list[tuple[str, str]] = []
    restarted: list[str] = []
    kept_failed: list[int] = []
    limit = False
    if failed and mesh.restart_policy == specs.NEVER:
        kept_failed = failed
    elif failed and mesh.restart_policy == specs.RESTART_PROC:
        for rank in failed:
            if restarts >= mesh.max_restarts:
                limit = True
                kept_failed.append(rank)
                continue
            restarts += 1
            deletes.append(_ident(pods[rank]))
            restarted.append(names.pod_name(mesh.name, rank))
    elif failed and mesh.restart_policy == specs.RESTART_MESH:
        if restarts >= mesh.max_restarts:
            limit = True
            kept_failed = failed
        else:
            restarts += 1
            deletes = [_ident(p) for p in pods.values() if not is_terminating(p)]
            restarted.append(mesh.name)
            # Nothing is created until every pod of this attempt is gone.
            return Plan(deletes=tuple(deletes), restarts=restarts, restarted=tuple(restarted))

    missing = [rank for rank in range(mesh.size) if rank not in pods]
    if mesh.restart_policy == specs.RESTART_MESH and any(is_terminating(p) for p in pods.values()):
        missing = []  # a previous attempt is still shutting down

    placement = placing.place(
        mesh, missing, own_pods=pods, partner=partner, partner_pods=partner_pods or {},
        nodes=nodes or {}, other_pods=other_pods, settings=settings)
    return Plan(creates=placement.procs, deletes=tuple(deletes), restarts=restarts,
                restarted=tuple(restarted), failed=tuple(kept_failed),
                restart_limit_reached=limit, refusal=placement.refusal,
                waiting=placement.waiting)
