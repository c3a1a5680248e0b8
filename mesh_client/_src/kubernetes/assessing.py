"""Is a ProcMesh ready, still coming, or stuck? A pure reading of the resource and its pods.

Used by :mod:`.attaching` while it waits; failures that no waiting can fix
(:data:`contract.FATAL_REASONS`: a GPU its own procs overflow, an exhausted restart limit, an
image that cannot be pulled; the mesh being deleted) end the wait at once, and what clears by
itself (:data:`contract.WAITING_REASONS`: room on a GPU or a node, the colocated mesh) is waited
for with its message. :func:`deletion` is shared with the CLI, which shows such a mesh as
``Terminating`` rather than as a status no operator keeps current. A mesh
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


#: The reason of a mesh that is being deleted (``metadata.deletionTimestamp`` set), as kubectl
#: shows such a pod; the client's word, not the operator's.
TERMINATING = "Terminating"

#: What removes each well-known finalizer, for :func:`deletion`'s message.
_FINALIZER_OWNERS = {
    "foregroundDeletion": "the garbage collector removes it once the mesh's pods are gone (foreground deletion)",
    "orphan": "the garbage collector removes it once it has orphaned the mesh's pods",
}


def deletion(mesh: Mapping[str, Any]) -> str | None:
    """Why a mesh that is being deleted is still there, or None when it is not being deleted.

    Its status stops being kept current once deletion starts (the deletion counts as a new
    generation), so without this the mesh would read as stale, sending users to look for a
    missing operator; what holds it is its finalizers, each removed by the controller that set it.
    """
    meta = mesh.get("metadata") or {}
    since = meta.get("deletionTimestamp")
    if not since:
        return None
    finalizers = [str(f) for f in meta.get("finalizers") or []]
    if not finalizers:
        return f"it is being deleted (since {since}); no finalizer holds it, so it goes shortly"
    held = "; ".join(f"{f}: {_FINALIZER_OWNERS.get(f, 'the controller that set it removes it')}"
                     for f in finalizers)
    return f"it is being deleted (since {since}) and waits for its finalizers ({held})"


#: Reasons of :func:`stale_status` (the client's, not the operator's: no operator wrote them).
NOT_RECONCILED = "NotReconciled"  # the mesh has no status at all
STATUS_STALE = "StatusStale"  # its status is for an older generation than its spec
STATUS_BEHIND_PODS = "StatusBehindPods"  # its pods contradict its status (current generation)


def stale_status(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None) -> tuple[str, str] | None:
    """(reason, message) when the mesh's status cannot be believed, else None.

    The status is the operator's word, and only as fresh as the operator: when none reconciles
    the mesh (down, or not watching its namespace) it keeps saying "8 of 8 ready" while pods go.
    So it is checked against the generation it was computed for and, when ``pods`` could be read
    (None: not allowed or not looked at), against the pods themselves.
    """
    meta = mesh.get("metadata") or {}
    status = mesh.get("status") or {}
    namespace = meta.get("namespace", "default")
    generation = meta.get("generation")
    hint = f"is the operator running, and watching namespace {namespace}?"
    if not status:
        return NOT_RECONCILED, f"no operator has reconciled this ProcMesh (generation {generation}): {hint}"
    observed = status.get("observedGeneration")
    if observed != generation:
        return STATUS_STALE, (
            f"no operator has reconciled generation {generation} of this ProcMesh (its status is for "
            f"generation {observed}): {hint}"
        )
    if pods is None:
        return None
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    wrong = []
    for proc in contract.status_procs(mesh):
        if not proc.get("ready"):
            continue
        pod = by_name.get(proc.get("pod"))
        if pod is None:
            wrong.append(f"{proc.get('pod')} is gone")
        elif not _pod_ready(pod):
            wrong.append(f"{proc.get('pod')} is not ready")
    if wrong:
        more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
        return STATUS_BEHIND_PODS, (
            f"the status says {status.get('readyProcs', '?')} of {status.get('desiredProcs', '?')} procs ready, "
            f"but pod {', '.join(wrong[:3])}{more}: the operator has not caught up; if this lasts, {hint}"
        )
    return None


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def assess(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None) -> Assessment:
    """Read the mesh's conditions, then its pods, into one verdict. ``pods``: the mesh's pods
    as listed, or None when they could not be read (then the status alone decides)."""
    status = mesh.get("status") or {}
    ready_c = condition(mesh, contract.READY)
    desired = status.get("desiredProcs", "?")
    progress = f"{status.get('readyProcs', 0)}/{desired} procs ready"
    gone = deletion(mesh)
    if gone is not None:  # a mesh being deleted never becomes Ready
        return Assessment(False, f"{progress}, {TERMINATING}", gone, TERMINATING, fatal=True)
    stale = stale_status(mesh, pods)
    procs = contract.status_procs(mesh)
    if (
        stale is None
        and ready_c.get("status") == "True"
        and procs
        and all(p.get("ready") and p.get("address") for p in procs)
    ):
        return Assessment(True, progress)
    if stale is None or stale[0] == STATUS_BEHIND_PODS:  # conditions of this generation hold
        for type_ in (contract.GPU_BUDGET, contract.DEGRADED, contract.READY, contract.PROGRESSING):
            c = condition(mesh, type_)
            if c.get("reason") in contract.FATAL_REASONS and c.get("status") in ("False", "True"):
                return Assessment(False, progress, f"{c['reason']}: {c.get('message', '')}", c["reason"], True)
    for pod in pods or ():
        reason, message, fatal = pod_problem(pod)
        if fatal:
            return Assessment(False, progress, message, reason, True)
    progressing = condition(mesh, contract.PROGRESSING)
    if (stale is None or stale[0] == STATUS_BEHIND_PODS) and \
            progressing.get("reason") in contract.WAITING_REASONS:
        # Placed once it clears (room frees, a node joins, the colocated mesh comes): waited for,
        # its message shown, as Pending pods are in kubectl.
        reason = str(progressing["reason"])
        return Assessment(False, f"{progress}, {reason}",
                          f"{reason}: {progressing.get('message', '')}", reason)
    if stale is not None:
        if not status:
            return Assessment(False, "waiting for the operator", stale[1], stale[0])
        return Assessment(False, f"{progress} (status not current)", stale[1], stale[0])
    degraded = condition(mesh, contract.DEGRADED)
    if degraded.get("status") == "True" and degraded.get("reason") == contract.RECONCILE_ERROR:
        # What holds the mesh back (a foreign pod under a rank's name, a request the API server
        # refused), retried by the operator: not the "Scheduling" it leaves behind.
        return Assessment(False, f"{progress}, {contract.RECONCILE_ERROR}",
                          f"{contract.RECONCILE_ERROR}: {degraded.get('message', '')}", contract.RECONCILE_ERROR)
    scheduled = condition(mesh, contract.SCHEDULED)
    if scheduled.get("status") == "False" and scheduled.get("reason"):
        # The mesh waits as one gang: the operator's word (the gang's shortfall, the
        # scheduler's reason) says more than any one pod's "SchedulingGated" or "Pending".
        return Assessment(False, f"{progress}, {scheduled['reason']}",
                          f"{scheduled['reason']}: {scheduled.get('message', '')}",
                          str(scheduled["reason"]))
    problems = [pod_problem(p) for p in pods or ()]
    problems = [p for p in problems if p[0]]
    if problems:
        reason, message, _ = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Assessment(False, f"{progress}, {reason}", message + more, reason)
    if ready_c:
        return Assessment(False, f"{progress}, {ready_c.get('reason', '')}", f"{ready_c.get('reason')}: {ready_c.get('message', '')}", ready_c.get("reason", ""))
    return Assessment(False, progress, "not ready yet", "")


def queue_story(mesh: Mapping[str, Any]) -> str | None:
    """Why a mesh labelled for a Kueue queue has no procs (its Admitted condition is False:
    queued, or evicted, e.g. preempted), or None."""
    admitted = condition(mesh, contract.ADMITTED)
    if admitted.get("status") != "False":
        return None
    return f"the mesh's Kueue workload is not admitted: {admitted.get('reason')}: {admitted.get('message', '')}"


def pod_verdict(pod: Mapping[str, Any]) -> str:
    """``; pod Evicted: <the kubelet's message>``, or "": the pod's own reason and message,
    which alone say why the kubelet ended a pod it evicted (over its ephemeral-storage limit,
    node pressure), while its container reads ``exit code 137, Error`` as after any SIGKILL."""
    said = contract.pod_verdict(pod)
    return f"; {said}" if said else ""


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
                node = (pod.get("spec") or {}).get("nodeName", "?")
                return (f"its container in pod {pod_name} on node {node} terminated ({contract.pod_termination(term)})"
                        f"{pod_verdict(pod)}; restarts: {cs.get('restartCount', 0)}")
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return f"pod {pod_name} {pod['status']['phase'].lower()}{pod_verdict(pod)}"
    return None



def unended_story(pod: Mapping[str, Any] | None, pod_name: str) -> str | None:
    """For a proc whose link timed out or found no route while its pod shows no end
    (:func:`explain_death` is None): the pod runs on, so the proc is not ended and no restart
    comes while it runs. Not ready: cut off (its node or the network) or hung. Ready (the
    kubelet's probe reaches it): the path from this client to it is what broke. None for a pod
    that is not Running (or is being deleted)."""
    if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    node = (pod.get("spec") or {}).get("nodeName", "?")
    if _pod_ready(pod):
        return (f"its pod {pod_name} on node {node} runs and is Ready (the cluster reaches it): the "
                f"path from this client to it is cut (a network policy, a VPN, a port-forward), not the proc")
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    why = ": ".join(str(x) for x in (ready.get("reason"), ready.get("message")) if x)
    since = f" since {ready['lastTransitionTime']}" if ready.get("lastTransitionTime") else ""
    return (f"its pod {pod_name} on node {node} still runs, not ready{since}{f' ({why})' if why else ''}: "
            f"the proc is cut off from this client (its node or the network) or hung, not ended")


def node_lost(mesh: Mapping[str, Any] | None) -> str | None:
    """The mesh's Ready message while its reason is NodeLost (the operator restarts the procs
    of a lost node once their toleration is up, whatever their pods show), else None."""
    ready = condition(mesh or {}, contract.READY)
    if ready.get("reason") != contract.NODE_LOST:
        return None
    return f"the mesh says {contract.NODE_LOST}: {ready.get('message', '')}"


def restart_back_off(mesh: Mapping[str, Any] | None) -> str | None:
    """The mesh's Ready message while failed procs wait out their restart back-off (they keep
    failing soon after their restarts: the operator restarts them when it ends, not now), else
    None."""
    ready = condition(mesh or {}, contract.READY)
    if ready.get("reason") != contract.CRASH_LOOP_BACK_OFF:
        return None
    return f"the mesh says {contract.CRASH_LOOP_BACK_OFF}: {ready.get('message', '')}"
