"""Kubernetes Events about a ProcMesh, posted for notable transitions, and mirrored to the log.

:mod:`.reconciling` decides *which* transitions matter (:func:`transitions`, pure) and posts
them with :class:`EventPoster` (core/v1 Events, so ``kubectl describe pm`` shows them).
"""

from __future__ import annotations

import datetime
import logging
import math
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import endings, ganging, kubeclient, names, planning, statuses

logger = logging.getLogger("procmesh_operator.events")

#: Scheduled reasons that are the operator's verdict that the gang cannot be placed now.
GANG_HELD = (ganging.UNSCHEDULABLE, ganging.GANG_STALLED)

NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024


def _reason_of(status: Mapping[str, Any] | None, type_: str) -> tuple[str | None, str | None]:
    c = statuses.condition((status or {}).get("conditions"), type_)
    return (None, None) if c is None else (c.get("status"), c.get("reason"))


def _failure_detail(pod: Mapping[str, Any] | None) -> str:
    if pod is None:
        return ""
    return f" ({endings.detail(pod) or f'pod phase {planning.pod_phase(pod)}'})"


def _counted(plan: planning.Plan, uncounted: Mapping[int, str]) -> str:
    """``restart 2``, or why this one is not counted (:func:`planning.disruption`)."""
    if not uncounted:
        return f"restart {plan.restarts}"
    why = ", ".join(sorted(set(uncounted.values())))
    return f"DisruptionTarget {why}: not counted in status.restarts, still {plan.restarts}"


def _waited(plan: planning.Plan, pods_before: Mapping[int, Mapping[str, Any]],
            ranks: list[int]) -> str:
    """`` after a back-off of 20 s (failure 3 in a row)`` for a restart that waited out its
    back-off (:mod:`.crashloops`: decided for the very pod it replaces), else ""."""
    loops = {loop.rank: loop for loop in plan.crash_loops}
    waited = [loops[r] for r in ranks if r in loops and loops[r].back_off > 0
              and loops[r].pod_uid == str(((pods_before.get(r) or {}).get("metadata") or {})
                                          .get("uid") or "")]
    if not waited:
        return ""
    loop = max(waited, key=lambda x: x.failures)
    return f" after a back-off of {math.ceil(loop.back_off)} s (failure {loop.failures} in a row)"


def transitions(old: Mapping[str, Any] | None, new: Mapping[str, Any], plan: planning.Plan | None,
                created: list[str], pods_before: Mapping[int, Mapping[str, Any]],
                mesh_name: str) -> list[tuple[str, str, str]]:
    """The ``(type, reason, message)`` events that the change from ``old`` to ``new`` status
    (and what the plan did) deserves. Pure."""
    events: list[tuple[str, str, str]] = []
    if created:
        events.append((NORMAL, "CreatedProcs", f"created {len(created)} pod(s): "
                       + ", ".join(created[:8]) + (" ..." if len(created) > 8 else "")))
    if plan is not None:
        lost = set(plan.lost_procs)
        for pod_name in plan.restarted:
            if pod_name == mesh_name:
                failed = [f"{contract.pod_name(mesh_name, r)} (rank {r}: its pod was deleted)"
                          if r in lost else contract.pod_name(mesh_name, r)
                          + _failure_detail(pods_before.get(r))
                          for r in sorted(lost | {r for r, p in pods_before.items()
                                                  if planning.is_failed(p)})]
                # None left to name: a lost proc's restart, counted by an operator that ended
                # before its deletes (its mark on a peer's pod: planning.counted_as).
                events.append((WARNING, "ProcFailed", "proc failed: " + (", ".join(failed) or (
                    "not known to this run (counted by an operator that ended before its deletes)"))
                               + f"; restarting the whole mesh ({_counted(plan, plan.uncounted)})"
                               + _waited(plan, pods_before, sorted(pods_before))))
            else:
                rank = contract.rank_of_pod_name(mesh_name, pod_name)
                detail = f" (rank {rank}: its pod was deleted)" if rank in lost else \
                    _failure_detail(pods_before.get(rank)) if rank is not None else ""
                free = {rank: plan.uncounted[rank]} if rank is not None and rank in plan.uncounted else {}
                events.append((WARNING, "ProcFailed", f"proc {pod_name} failed{detail}; "
                               f"restarting it ({_counted(plan, free)})"
                               + _waited(plan, pods_before, [] if rank is None else [rank])))
    for type_ in (contract.READY, contract.PROGRESSING, contract.DEGRADED, contract.GPU_BUDGET):
        before, after = _reason_of(old, type_), _reason_of(new, type_)
        if before == after:
            continue
        c = statuses.condition(new.get("conditions"), type_) or {}
        status, reason = after
        message = str(c.get("message") or "")
        if type_ == contract.READY and status == "True":
            events.append((NORMAL, "MeshReady", message))
        elif type_ == contract.READY and reason == statuses.SUSPENDED:
            events.append((NORMAL, "Suspended", message))
        elif type_ == contract.READY and before[1] == statuses.SUSPENDED:
            events.append((NORMAL, "Resumed", "spec.suspend is false: recreating the procs"))
        elif type_ == contract.GPU_BUDGET and status == "False":
            events.append((WARNING, str(reason), message))
        elif type_ == contract.PROGRESSING and reason == contract.CRASH_LOOP_BACK_OFF:
            events.append((WARNING, str(reason), message))  # a restart waits: procs keep failing
        elif type_ == contract.PROGRESSING and status == "True" and reason in \
                contract.WAITING_REASONS and reason not in statuses.BUDGET_REFUSALS:
            events.append((NORMAL, str(reason), message))  # e.g. the colocated mesh is missing
        elif type_ == contract.PROGRESSING and status == "False" and reason not in (
                statuses.ALL_PROCS_READY, statuses.SUSPENDED) and reason not in \
                statuses.BUDGET_REFUSALS:
            events.append((WARNING, str(reason), message))
        elif type_ == contract.DEGRADED and status == "True" and \
                reason == statuses.RECONCILE_ERROR:
            events.append((WARNING, str(reason), message))
    # The operator's verdict on the gang (Scheduled): that it cannot be placed, and that it is
    # placed after all. Kueue's admission said only that its quota is free; the scheduler's own
    # FailedScheduling events are on pods, and in gate mode it never sees the gang at all.
    before, after = _reason_of(old, contract.SCHEDULED), _reason_of(new, contract.SCHEDULED)
    if before != after:
        c = statuses.condition(new.get("conditions"), contract.SCHEDULED) or {}
        if after[0] == "False" and after[1] in GANG_HELD:
            events.append((WARNING, str(after[1]), str(c.get("message") or "")))
        elif after[0] == "True" and before[1] in GANG_HELD:
            events.append((NORMAL, str(after[1]), f"{c.get('message') or ''} (the gang was {before[1]})"))
    # A queued mesh (Kueue): admitted, or stopped by an eviction (Admitted takes Evicted's
    # reason, e.g. Preempted, only while quota is still reserved; waiting says Pending).
    before, after = _reason_of(old, contract.ADMITTED), _reason_of(new, contract.ADMITTED)
    if after[0] is not None and before != after:
        c = statuses.condition(new.get("conditions"), contract.ADMITTED) or {}
        message = str(c.get("message") or "")
        if after[0] == "True":
            events.append((NORMAL, "Admitted", message))
        elif (statuses.condition(new.get("conditions"), contract.READY) or {}).get("reason") \
                == after[1] and after[1] != contract.QUEUED:
            events.append((WARNING, str(after[1]), message))  # evicted: its procs are stopped
        elif before[0] is None or before[0] == "True":
            events.append((NORMAL, contract.QUEUED, message))
    return events


class EventPoster:
    """Posts core/v1 Events on behalf of the operator."""

    def __init__(self, client: kubeclient.KubeClient) -> None:
        self._client = client
        self._instance = names.instance()

    async def post(self, mesh: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        meta = mesh.get("metadata") or {}
        namespace = str(meta.get("namespace", "default"))
        ref = {"apiVersion": contract.API_VERSION, "kind": contract.KIND, "name": meta.get("name"),
               "namespace": namespace, "uid": meta.get("uid")}
        log = logger.warning if type_ == WARNING else logger.info
        log("%s: %s", reason, message, extra={"k8s_ref": ref, "event_reason": reason})
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
            "involvedObject": ref, "type": type_, "reason": reason,
            "message": message[:MAX_MESSAGE], "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": contract.MANAGED_BY},
            "reportingComponent": contract.MANAGED_BY, "reportingInstance": self._instance,
        }
        try:
            await self._client.create(kubeclient.core_path(namespace, "events"), body)
        except (kubeclient.ApiError, kubeclient.Unanswered) as e:  # events are best effort
            logger.debug("could not post event %s: %s", reason, e)
