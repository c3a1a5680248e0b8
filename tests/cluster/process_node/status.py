"""Pod status as a pure function of what the process node observed.

:func:`compute` derives phase, conditions (keeping each condition's lastTransitionTime while its
status holds), container statuses, addresses, start time and the unsupported-fields reason. The
result is sent as a strategic-merge patch of ``pods/<name>/status`` by :mod:`.pods`: conditions
merge by type, so the scheduler's PodScheduled and readiness-gate conditions set by others stay.
"""

from __future__ import annotations

from typing import Any

from tests.cluster.process_node import support

Obj = dict[str, Any]
OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def phase(container_statuses: list[Obj], init_statuses: list[Obj] | None = None) -> str:
    """Failed if an init container failed for good; Pending until the init containers succeeded
    and every container has run once; Running while any runs or will restart; then Succeeded if
    every container exited 0, else Failed."""
    for entry in init_statuses or []:
        terminated = entry["state"].get("terminated")
        if terminated is None:
            return "Pending"
        if terminated["exitCode"] != 0:
            return "Failed"
    if any(c["containerID"] is None for c in container_statuses):
        return "Pending"
    if any("terminated" not in c["state"] for c in container_statuses):
        return "Running"
    if all(c["state"]["terminated"]["exitCode"] == 0 for c in container_statuses):
        return "Succeeded"
    return "Failed"


def _condition(previous: list[Obj], kind: str, status: bool, now: str, reason: str | None = None) -> Obj:
    value = "True" if status else "False"
    old = next((c for c in previous if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == value else now
    found: Obj = {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": since}
    if reason and not status:
        found["reason"] = reason
    return found


def compute(pod: Obj, container_statuses: list[Obj], *, pod_ip: str, host_ip: str, start_time: str,
            unsupported: list[str], now: str, init_statuses: list[Obj] | None = None) -> Obj:
    """The status this node reports for ``pod``."""
    current = pod.get("status") or {}
    previous = current.get("conditions") or []
    init_statuses = init_statuses or []
    pod_phase = phase(container_statuses, init_statuses)
    initialized = all(s["state"].get("terminated", {}).get("exitCode") == 0 for s in init_statuses)
    terminal = pod_phase in ("Succeeded", "Failed")
    containers_ready = bool(container_statuses) and all(c["ready"] for c in container_statuses)
    gates = [g["conditionType"] for g in pod["spec"].get("readinessGates") or []]
    gates_ok = all(any(c.get("type") == g and c.get("status") == "True" for c in previous) for g in gates)
    not_ready = "PodCompleted" if terminal else "ContainersNotReady"
    conditions = [
        _condition(previous, "PodReadyToStartContainers", not terminal or bool(pod_ip), now),
        _condition(previous, "Initialized", initialized, now, "ContainersNotInitialized"),
        _condition(previous, "ContainersReady", containers_ready, now, not_ready),
        _condition(previous, "Ready", containers_ready and gates_ok, now,
                   not_ready if not containers_ready else "ReadinessGatesNotReady"),
    ]
    return {
        "phase": pod_phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": current.get("startTime") or start_time,
        "containerStatuses": container_statuses,
        **({"initContainerStatuses": init_statuses} if init_statuses else {}),
        "reason": support.REASON if unsupported else None,
        "message": ("unsupported by the procmesh process node: " + "; ".join(unsupported)) if unsupported else None,
    }


def strategic(status: Obj) -> Obj:
    """``status`` shaped as a strategic-merge patch: a container's other state keys are cleared."""
    patched = dict(status)
    for key in ("initContainerStatuses", "containerStatuses"):
        if key not in status:
            continue
        patched[key] = []
        for entry in status[key]:
            entry = dict(entry)
            for field in ("state", "lastState"):
                given = entry.get(field) or {}
                entry[field] = {k: given.get(k) for k in ("waiting", "running", "terminated")}
            patched[key].append(entry)
    return patched
