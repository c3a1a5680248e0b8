"""ProcMesh status: condition types, their reasons, and the pure ``compute_status``.

Conditions follow the Kubernetes format (type, status, observedGeneration, lastTransitionTime,
reason, message) and are always all present. ``phase`` is a display summary derived from them
for ``kubectl get``; nothing reads it back. :mod:`.reconciling` calls :func:`compute_status`
with the :class:`~procmesh_operator.planning.Plan` it carried out and writes the result through
the status subresource only when :func:`differs` says so.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from procmesh_operator import names, observing, placing, planning, specs

# --- Condition types ---------------------------------------------------------------------------
#: Ready: the summary. True when every desired proc's pod is Ready (its proc server accepts TCP).
READY = "Ready"
#: Progressing: True while the operator works toward the spec (creating, restarting, waiting);
#: False once the mesh is complete, or when it cannot proceed (reason says why).
PROGRESSING = "Progressing"
#: Degraded: True when a proc failed and will not be restarted, or the last reconcile failed.
DEGRADED = "Degraded"
#: GPUBudgetSatisfied: the placement check. True when every device the mesh uses fits its procs'
#: memory fractions plus a CUDA context each (or the mesh needs none); False when refused.
GPU_BUDGET = "GPUBudgetSatisfied"

CONDITION_TYPES = (READY, PROGRESSING, DEGRADED, GPU_BUDGET)

# --- Reasons -----------------------------------------------------------------------------------
ALL_PROCS_READY = "AllProcsReady"  # Ready=True, Progressing=False
PROCS_NOT_READY = "ProcsNotReady"  # Ready=False while procs start
NODE_LOST = "NodeLost"  # Ready=False: procs are on a NotReady/unreachable/deleted node
CREATING_PROCS = "CreatingProcs"  # Progressing=True
RESTARTING = "Restarting"  # Progressing=True after a restart by policy
WAITING_FOR_COLOCATED = "WaitingForColocatedMesh"  # Progressing=True, budget Unknown
#: Progressing=True: pods of an earlier mesh of this name (another uid) still hold rank names.
WAITING_FOR_PREVIOUS_PODS = "WaitingForPreviousPods"
SUSPENDED = "Suspended"  # spec.suspend: pods removed, resource kept
PROC_FAILED = "ProcFailed"  # Degraded=True under restartPolicy Never
RESTART_LIMIT_REACHED = "RestartLimitReached"  # Degraded=True, spec.maxRestarts used up
RECONCILE_ERROR = "ReconcileError"  # Degraded=True: an API call failed; retried with backoff
NO_FAILURES = "NoFailures"  # Degraded=False
NO_GPUS = "NoGPUs"  # budget True: gpus.mode none
DEVICE_PLUGIN_ASSIGNS = "DevicePluginAssigns"  # budget True: plugin mode, per-proc fraction
WITHIN_BUDGET = "WithinBudget"  # budget True: pinned devices checked
# Refusals (placing.py): InvalidColocation, DeviceNotFound, GPUBudgetExceeded, NoNodeFits.
BUDGET_REFUSALS = (placing.DEVICE_NOT_FOUND, placing.BUDGET_EXCEEDED, placing.NO_NODE_FITS)

# --- Phases (display only) ---------------------------------------------------------------------
PHASE_READY = "Ready"
PHASE_PROGRESSING = "Progressing"
PHASE_DEGRADED = "Degraded"
PHASE_FAILED = "Failed"
PHASE_SUSPENDED = "Suspended"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(conditions: list[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` in a status's list, or None (which means Unknown)."""
    for c in conditions or []:
        if c.get("type") == type_:
            return c
    return None


def _condition(previous: list[Mapping[str, Any]] | None, type_: str, status: str, reason: str,
               message: str, generation: int, now: str) -> dict[str, Any]:
    old = condition(previous, type_)
    since = now
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        since = str(old["lastTransitionTime"])
    return {"type": type_, "status": status, "observedGeneration": generation,
            "lastTransitionTime": since, "reason": reason, "message": message}


def proc_entry(mesh: specs.MeshSpec, rank: int, pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """One ``status.procs[]`` entry: what a client needs to reach the proc."""
    entry: dict[str, Any] = {"rank": rank, "coords": mesh.shape.coords(rank),
                             "pod": names.pod_name(mesh.name, rank), "ready": False}
    if pod is None:
        return entry
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName"):
        entry["node"] = spec["nodeName"]
    if status.get("podIP") and not planning.is_terminating(pod):
        entry["address"] = f"{status['podIP']}:{mesh.port}"
    entry["ready"] = planning.is_ready(pod)
    entry["podPhase"] = "Terminating" if planning.is_terminating(pod) else planning.pod_phase(pod)
    gpu = observing.observed_gpu(pod)
    if gpu is not None:
        entry["gpu"] = gpu
    return entry


def compute_status(mesh: specs.MeshSpec, previous: Mapping[str, Any] | None,
                   pods: Mapping[int, Mapping[str, Any]], plan: planning.Plan | None,
                   error: str | None = None, *, now: str | None = None) -> dict[str, Any]:
    """The status of ``mesh`` given its pods (by rank, as observed after the plan ran), the plan
    (None when the reconcile failed before planning) and the error of the reconcile, if any."""
    now = now or now_rfc3339()
    previous = previous or {}
    prev_conditions = previous.get("conditions")
    gen = mesh.generation
    restarts = plan.restarts if plan is not None else int(previous.get("restarts") or 0)
    desired = 0 if mesh.suspend else mesh.size
    ready = 0 if mesh.suspend else sum(
        1 for rank, pod in pods.items() if rank < mesh.size and planning.is_ready(pod))
    refusal = plan.refusal if plan is not None else None

    def cond(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return _condition(prev_conditions, type_, status, reason, message, gen, now)

    # Ready (summary).
    if mesh.suspend:
        ready_c = cond(READY, "False", SUSPENDED, "spec.suspend is true: the mesh has no pods")
    elif ready == desired:
        ready_c = cond(READY, "True", ALL_PROCS_READY, f"{ready} of {desired} procs ready")
    elif refusal is not None:
        ready_c = cond(READY, "False", refusal.reason, refusal.message)
    elif plan is not None and plan.lost:
        ready_c = cond(READY, "False", NODE_LOST, node_lost_message(mesh, plan))
    else:
        ready_c = cond(READY, "False", PROCS_NOT_READY, f"{ready} of {desired} procs ready")

    # Degraded.
    if error is not None:
        degraded_c = cond(DEGRADED, "True", RECONCILE_ERROR, error)
    elif plan is not None and plan.restart_limit_reached:
        degraded_c = cond(DEGRADED, "True", RESTART_LIMIT_REACHED,
                          f"procs {list(plan.failed)} failed and spec.maxRestarts "
                          f"({mesh.max_restarts}) restarts are used up; raise maxRestarts or "
                          f"suspend and resume the mesh")
    elif plan is not None and plan.failed:
        degraded_c = cond(DEGRADED, "True", PROC_FAILED,
                          f"procs {list(plan.failed)} failed and restartPolicy is Never")
    elif plan is None:
        old = condition(prev_conditions, DEGRADED)
        degraded_c = dict(old) if old else cond(DEGRADED, "Unknown", RECONCILE_ERROR, "")
    else:
        degraded_c = cond(DEGRADED, "False", NO_FAILURES, "no proc has failed beyond its policy")

    # Progressing.
    if mesh.suspend:
        progressing_c = cond(PROGRESSING, "False", SUSPENDED, "suspended")
    elif refusal is not None:
        progressing_c = cond(PROGRESSING, "False", refusal.reason, refusal.message)
    elif degraded_c["status"] == "True" and degraded_c["reason"] != RECONCILE_ERROR:
        progressing_c = cond(PROGRESSING, "False", degraded_c["reason"], degraded_c["message"])
    elif ready == desired and error is None:
        progressing_c = cond(PROGRESSING, "False", ALL_PROCS_READY, "the mesh is complete")
    elif plan is not None and plan.waiting is not None:
        progressing_c = cond(PROGRESSING, "True", WAITING_FOR_COLOCATED, plan.waiting)
    elif plan is not None and plan.foreign:
        progressing_c = cond(PROGRESSING, "True", WAITING_FOR_PREVIOUS_PODS,
                             f"pods {list(plan.foreign)} belong to an earlier ProcMesh of this "
                             f"name (another uid); their ranks are created once garbage "
                             f"collection has removed them")
    elif plan is not None and (plan.restarted or any(planning.is_terminating(p)
                                                     for p in pods.values())):
        progressing_c = cond(PROGRESSING, "True", RESTARTING,
                             f"restart {restarts} of at most {mesh.max_restarts}")
    else:
        progressing_c = cond(PROGRESSING, "True", CREATING_PROCS,
                             f"{len(pods)} of {desired} pods exist, {ready} ready")

    # GPU budget.
    if refusal is not None and refusal.reason in BUDGET_REFUSALS:
        budget_c = cond(GPU_BUDGET, "False", refusal.reason, refusal.message)
    elif refusal is not None:
        budget_c = cond(GPU_BUDGET, "Unknown", refusal.reason, "not checked: " + refusal.reason)
    elif plan is not None and plan.waiting is not None:
        budget_c = cond(GPU_BUDGET, "Unknown", WAITING_FOR_COLOCATED, plan.waiting)
    elif mesh.gpus.mode == specs.MODE_NONE:
        budget_c = cond(GPU_BUDGET, "True", NO_GPUS, "gpus.mode is none")
    elif mesh.gpus.mode == specs.MODE_PLUGIN:
        budget_c = cond(GPU_BUDGET, "True", DEVICE_PLUGIN_ASSIGNS,
                        f"each proc requests one {mesh.gpus.resource_name}; the device plugin "
                        f"picks the device")
    else:
        budget_c = cond(GPU_BUDGET, "True", WITHIN_BUDGET,
                        "every pinned device fits its procs' memory fractions and CUDA contexts")

    conditions = [ready_c, progressing_c, degraded_c, budget_c]
    return {
        "observedGeneration": gen,
        "phase": derive_phase(mesh.suspend, conditions),
        "desiredProcs": desired,
        "readyProcs": ready,
        "restarts": restarts,
        "conditions": conditions,
        "procs": [] if mesh.suspend else [proc_entry(mesh, r, pods.get(r))
                                          for r in range(mesh.size)],
    }


def node_lost_message(mesh: specs.MeshSpec, plan: planning.Plan) -> str:
    by_node: dict[str, list[int]] = {}
    for rank, node in sorted(plan.lost.items()):
        by_node.setdefault(node, []).append(rank)
    where = "; ".join(f"ranks {ranks} on node {node}" for node, ranks in sorted(by_node.items()))
    return (f"{where}: the node is NotReady, unreachable or gone; its procs are restarted per "
            f"restartPolicy ({mesh.restart_policy}) once their node-loss toleration is up")


def derive_phase(suspended: bool, conditions: list[Mapping[str, Any]]) -> str:
    """A one-word summary for ``kubectl get`` (display only; never read back)."""
    if suspended:
        return PHASE_SUSPENDED
    ready = condition(conditions, READY) or {}
    progressing = condition(conditions, PROGRESSING) or {}
    degraded = condition(conditions, DEGRADED) or {}
    if ready.get("status") == "True":
        return PHASE_READY
    if progressing.get("status") == "False":
        return PHASE_FAILED
    if degraded.get("status") == "True":
        return PHASE_DEGRADED
    return PHASE_PROGRESSING


def differs(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change anything (transition times are kept by
    :func:`compute_status` when a condition's status holds, so plain equality suffices)."""
    if not old:
        return True
    return any(old.get(k) != v for k, v in new.items())
