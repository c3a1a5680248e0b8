"""Is a ProcMesh ready, still coming, or stuck? A pure reading of the resource and its pods.

Used by :mod:`.attaching` while it waits; failures that no waiting can fix (a refused GPU
budget, an exhausted restart limit, an image that cannot be pulled) end the wait at once. A mesh
that waits as one gang (condition Scheduled=False) is reported with the operator's reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mesh_client._src import contract


@dataclasses.dataclass(frozen=True)
class Assessment:
    ready: bool
    progress: str  # one line for a progress display
    problem: str = ""  # why it is not ready (for a timeout or a fatal stop)
    reason: str = ""
    fatal: bool = False


def condition(mesh: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    conditions: list[Mapping[str, Any]] = (mesh.get("status") or {}).get("conditions") or []
    for c in conditions:
        if c.get("type") == type_:
            return c
    return {}


def pod_problem(pod: Mapping[str, Any]) -> tuple[str, str, bool]:
    """(reason, message, fatal) of a pod that is not running well, or ("", "", False)."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c.get("reason") or "Unschedulable", f"pod {name} is Pending: {c.get('message', 'not scheduled')}", False
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in contract.STUCK_WAITING_REASONS:
            return waiting["reason"], f"pod {name}: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": "), True
        if waiting.get("reason") == "CrashLoopBackOff":
            last = (cs.get("lastState") or {}).get("terminated") or {}
            return "CrashLoopBackOff", (
                f"pod {name} keeps crashing (exit code {last.get('exitCode', '?')}, {cs.get('restartCount', 0)} restarts); "
                f"kubectl logs {name} --previous shows why"
            ), False
    if status.get("phase") == "Pending":
        return "Pending", f"pod {name} is Pending", False
    return "", "", False


def assess(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Assessment:
    """Read the mesh's conditions, then its pods, into one verdict."""
    status = mesh.get("status") or {}
    generation = (mesh.get("metadata") or {}).get("generation")
    ready_c = condition(mesh, contract.READY)
    desired = status.get("desiredProcs", "?")
    progress = f"{status.get('readyProcs', 0)}/{desired} procs ready"
    current = status.get("observedGeneration") == generation
    procs = status.get("procs") or []
    if (
        current
        and ready_c.get("status") == "True"
        and procs
        and all(p.get("ready") and p.get("address") for p in procs)
    ):
        return Assessment(True, progress)
    for type_ in (contract.GPU_BUDGET, contract.DEGRADED, contract.READY, contract.PROGRESSING):
        c = condition(mesh, type_)
        if c.get("reason") in contract.FATAL_REASONS and c.get("status") in ("False", "True"):
            return Assessment(False, progress, f"{c['reason']}: {c.get('message', '')}", c["reason"], True)
    for pod in pods:
        reason, message, fatal = pod_problem(pod)
        if fatal:
            return Assessment(False, progress, message, reason, True)
    scheduled = condition(mesh, contract.SCHEDULED)
    if current and scheduled.get("status") == "False" and scheduled.get("reason"):
        # The mesh waits as one gang: the operator's word (the gang's shortfall, the
        # scheduler's reason) says more than any one pod's "SchedulingGated" or "Pending".
        return Assessment(False, f"{progress}, {scheduled['reason']}",
                          f"{scheduled['reason']}: {scheduled.get('message', '')}",
                          str(scheduled["reason"]))
    problems = [pod_problem(p) for p in pods]
    problems = [p for p in problems if p[0]]
    if problems:
        reason, message, _ = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Assessment(False, f"{progress}, {reason}", message + more, reason)
    if not status:
        return Assessment(False, "waiting for the operator", "the operator has not reported any status: is it running?", "NoStatus")
    if ready_c:
        return Assessment(False, f"{progress}, {ready_c.get('reason', '')}", f"{ready_c.get('reason')}: {ready_c.get('message', '')}", ready_c.get("reason", ""))
    return Assessment(False, progress, "not ready yet", "")


def explain_death(pod: Mapping[str, Any] | None, pod_name: str) -> str | None:
    """How the proc server in ``pod`` ended, if its status says so yet."""
    if pod is None:
        return f"pod {pod_name} was deleted"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return f"pod {pod_name} is being deleted"
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        for key in ("state", "lastState"):
            term = (cs.get(key) or {}).get("terminated")
            if term:
                bits = [f"exit code {term.get('exitCode')}"]
                if term.get("signal"):
                    bits.append(f"signal {term['signal']}")
                if term.get("reason"):
                    bits.append(str(term["reason"]))
                node = (pod.get("spec") or {}).get("nodeName", "?")
                return f"its container in pod {pod_name} on node {node} terminated ({', '.join(bits)}); restarts: {cs.get('restartCount', 0)}"
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return f"pod {pod_name} {pod['status']['phase'].lower()}"
    return None
