"""What ``procmesh get``, ``describe`` and ``top`` print, as pure functions of API objects.

kubectl's conventions: upper-case headers, columns padded by three spaces, ``<none>`` for
missing values, ages as ``kubectl get`` writes them (``45s``, ``3m12s``, ``5h``, ``2d``).
:mod:`.commands` fetches the objects and prints these; unit tests call them directly.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from mesh_client._src.kubernetes import assessing

NONE = "<none>"


def render(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> str:
    """A kubectl-style table: columns as wide as their widest cell, three spaces apart."""
    table = [list(header), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(indent + line for line in lines)


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def age(since: str | None, now: datetime.datetime) -> str:
    """``kubectl get``'s human duration (k8s.io/apimachinery duration.HumanDuration)."""
    start = parse_time(since)
    if start is None:
        return NONE
    seconds = int((now - start).total_seconds())
    if seconds < 0:
        return "0s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def shape_text(mesh: Mapping[str, Any]) -> str:
    """``hosts=1 x gpus=2``: the mesh's dimensions in order (hosts first)."""
    spec = mesh.get("spec") or {}
    dims = [(contract.HOSTS_DIM, int(spec.get(contract.HOSTS_DIM, 1)))]
    dims += [(str(d["name"]), int(d["size"])) for d in spec.get("perHost") or []]
    return " x ".join(f"{n}={s}" for n, s in dims)


def spec_size(spec: Mapping[str, Any]) -> int | str:
    """How many procs the spec asks for (hosts times each perHost size), for a mesh no operator
    has counted yet; ``?`` for a spec that does not say (the CRD refuses such a spec)."""
    try:
        size = int(spec.get(contract.HOSTS_DIM, 1))
        for dim in spec.get("perHost") or []:
            size *= int(dim["size"])
    except (TypeError, ValueError, KeyError):
        return "?"
    return size


def pods_by_mesh(pods: Sequence[Mapping[str, Any]] | None) -> dict[tuple[str, str], list[Mapping[str, Any]]] | None:
    """Pods grouped by (namespace, mesh label); None stays None (pods not readable)."""
    if pods is None:
        return None
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        mesh = (meta.get("labels") or {}).get(contract.MESH_LABEL)
        if mesh:
            out.setdefault((str(meta.get("namespace")), str(mesh)), []).append(pod)
    return out


def phase(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The operator's phase, unless the mesh is being deleted (``Terminating``, as kubectl shows
    such a pod) or its status cannot be believed (:func:`assessing.stale_status`): then what the
    client sees instead, so ``get`` never shows an old ``Ready`` as current."""
    if assessing.deletion(mesh) is not None:
        return assessing.TERMINATING
    stale = assessing.stale_status(mesh, pods)
    if stale is not None:
        return stale[0]
    return str((mesh.get("status") or {}).get("phase") or NONE)


GET_HEADER = ["NAME", "READY", "PHASE", "RESTARTS", "GPUS", "AGE"]
GET_WIDE = ["SHAPE", "BUDGET", "COLOCATED WITH", "GENERATION"]


def get_row(mesh: Mapping[str, Any], now: datetime.datetime, *, wide: bool = False,
            namespace: bool = False, pods: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """One ``procmesh get`` row. READY is ready/desired, as ``kubectl get deployment`` shows it.
    ``pods``: the mesh's pods, to check its status against (None: not readable)."""
    meta, spec = mesh.get("metadata") or {}, mesh.get("spec") or {}
    status = mesh.get("status") or {}
    ready = f"{status.get('readyProcs', 0)}/{status.get('desiredProcs', spec_size(spec))}"
    row = [str(meta.get("name")), ready, phase(mesh, pods), str(status.get("restarts", 0)),
           str((spec.get("gpus") or {}).get("mode", contract.GPU_MODE_NONE)),
           age(meta.get("creationTimestamp"), now)]
    if namespace:
        row.insert(0, str(meta.get("namespace")))
    if wide:
        budget = assessing.condition(mesh, contract.GPU_BUDGET)
        row += [shape_text(mesh), str(budget.get("status") or NONE), str(spec.get("colocateWith") or NONE),
                f"{status.get('observedGeneration', NONE)}/{meta.get('generation')}"]
    return row


# --- describe ----------------------------------------------------------------------------------

PROCS_HEADER = ["RANK", "COORDS", "POD", "NODE", "GPU", "MEMORY CAP", "READY", "STATE", "RESTARTS",
                "LAST FAILURE"]


def dim_names(mesh: Mapping[str, Any]) -> list[str]:
    spec = mesh.get("spec") or {}
    return [contract.HOSTS_DIM, *(str(d["name"]) for d in spec.get("perHost") or [])]


def coords_text(coords: Mapping[str, Any], order: Sequence[str] = ()) -> str:
    """``hosts=0,gpus=1`` in the mesh's dimension order (the API may return the map sorted)."""
    keys = [k for k in order if k in coords] + [k for k in coords if k not in order]
    return ",".join(f"{k}={coords[k]}" for k in keys) or NONE


def pod_state(pod: Mapping[str, Any] | None) -> tuple[str, str]:
    """(state, restarts) of a proc pod, as ``kubectl get pod`` would say them."""
    if pod is None:
        return "Missing", "0"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating", _restarts(pod)
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"]), _restarts(pod)
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"Pending ({c.get('reason') or 'Unschedulable'})", "0"
    return str(status.get("phase") or "Unknown"), _restarts(pod)


def _restarts(pod: Mapping[str, Any]) -> str:
    return str(sum(int(cs.get("restartCount") or 0)
                   for cs in (pod.get("status") or {}).get("containerStatuses") or []))


def last_failure(pod: Mapping[str, Any] | None, now: datetime.datetime) -> str:
    """The last time the proc's container ended (exit code, signal, reason, how long ago), or
    why its pod is stuck (the scheduler's or the kubelet's words); ``-`` when nothing failed."""
    if pod is None:
        return "-"
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = ((cs.get("lastState") or {}).get("terminated")
                or (cs.get("state") or {}).get("terminated"))
        if term:
            return f"{contract.pod_termination(term, 'exit')} ({age(term.get('finishedAt'), now)} ago){assessing.pod_verdict(pod)}"
    reason, message, _ = assessing.pod_problem(pod)
    if reason and reason != "Pending":
        return message
    return "-"


def memory_cap(mesh: Mapping[str, Any], pod: Mapping[str, Any] | None) -> str:
    """The proc's memory fraction of its GPU (what the operator decided, from the pod)."""
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    fraction = annotations.get(contract.MEMORY_FRACTION_ANNOTATION)
    if fraction is None:
        fraction = ((mesh.get("spec") or {}).get("gpus") or {}).get("memoryFraction")
    if fraction is None:
        gpus = (mesh.get("spec") or {}).get("gpus") or {}
        return "-" if gpus.get("mode", contract.GPU_MODE_NONE) == contract.GPU_MODE_NONE else "whole GPU"
    return f"{float(fraction):.0%} of GPU"


def stops_procs_for_back_off(mesh: Mapping[str, Any]) -> bool:
    """Whether ``mesh`` has stopped its healthy procs while a failed one waits out its restart
    back-off: under RestartMesh alone, whose restart replaces them all (the Ready condition says
    until when), so their pods are gone by the operator's hand, not lost. Under RestartProc the
    others run on through a back-off, and a pod gone then is missing."""
    policy = (mesh.get("spec") or {}).get("restartPolicy", contract.DEFAULT_RESTART_POLICY)
    return (policy == contract.RESTART_MESH
            and assessing.condition(mesh, contract.READY).get("reason") == contract.CRASH_LOOP_BACK_OFF)


def proc_rows(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None,
              now: datetime.datetime) -> list[list[str]]:
    """describe's proc → pod → node → GPU → memory cap table, with live pod state. ``pods``
    None (this client may not list them): READY is the status's, STATE and RESTARTS unknown
    (``-``), never a healthy proc shown Missing."""
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods or ()}
    backing_off = stops_procs_for_back_off(mesh)
    rows = []
    for proc in sorted(contract.status_procs(mesh), key=lambda p: p.get("rank", 0)):
        pod = by_name.get(proc.get("pod"))
        if pods is None:
            state, restarts = "-", "-"
            ready = "true" if proc.get("ready") else "false"
        elif pod is None and backing_off:
            state, restarts = f"Stopped ({contract.CRASH_LOOP_BACK_OFF})", "0"
            ready = "false"
        else:
            state, restarts = pod_state(pod)
            ready = "true" if pod is not None and _pod_is_ready(pod) else "false"
        node = proc.get("node") or ((pod or {}).get("spec") or {}).get("nodeName") or NONE
        rows.append([str(proc.get("rank")), coords_text(proc.get("coords") or {}, dim_names(mesh)), str(proc.get("pod")),
                     str(node), str(proc.get("gpu") or "-"), memory_cap(mesh, pod), ready, state, restarts,
                     last_failure(pod, now)])
    return rows


def _pod_is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


CONDITIONS_HEADER = ["TYPE", "STATUS", "REASON", "GENERATION", "AGE", "MESSAGE"]


def condition_rows(mesh: Mapping[str, Any], now: datetime.datetime) -> list[list[str]]:
    return [[str(c.get("type")), str(c.get("status")), str(c.get("reason") or NONE),
             str(c.get("observedGeneration", NONE)), age(c.get("lastTransitionTime"), now),
             str(c.get("message") or "")]
            for c in (mesh.get("status") or {}).get("conditions") or []]


EVENTS_HEADER = ["TYPE", "REASON", "AGE", "FROM", "MESSAGE"]


def event_rows(events: Sequence[Mapping[str, Any]], now: datetime.datetime) -> list[list[str]]:
    rows = []
    for e in events:
        when = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or NONE
        count = int(e.get("count") or 1)
        rows.append([str(e.get("type")), str(e.get("reason")),
                     age(when, now) + (f" (x{count})" if count > 1 else ""), str(source),
                     str(e.get("message") or "").strip()])
    return rows


def describe_text(mesh: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None,
                  events: Sequence[Mapping[str, Any]] | None, now: datetime.datetime) -> str:
    """``procmesh describe MESH``: summary, conditions, procs, events (None: this client may
    not list them, said as such rather than as no events)."""
    meta, spec = mesh.get("metadata") or {}, mesh.get("spec") or {}
    status = mesh.get("status") or {}
    gpus = spec.get("gpus") or {}
    gpu_bits = [str(gpus.get("mode", contract.GPU_MODE_NONE))]
    if gpus.get("deviceIDs") is not None:
        gpu_bits.append(f"deviceIDs {gpus['deviceIDs']}")
    if gpus.get("memoryFraction") is not None:
        gpu_bits.append(f"memoryFraction {gpus['memoryFraction']}")
    size = 1
    for part in shape_text(mesh).split(" x "):
        size *= int(part.split("=")[1])
    lines = [
        f"Name:           {meta.get('name')}",
        f"Namespace:      {meta.get('namespace')}",
        f"Created:        {meta.get('creationTimestamp')} ({age(meta.get('creationTimestamp'), now)} ago)",
        f"Shape:          {shape_text(mesh)} ({size} procs)",
        f"GPUs:           {', '.join(gpu_bits)}",
    ]
    if spec.get("colocateWith"):
        lines.append(f"Colocated with: {spec['colocateWith']}")
    lines += [
        f"Restart policy: {spec.get('restartPolicy', contract.DEFAULT_RESTART_POLICY)} "
        f"({status.get('restarts', 0)} of at most {spec.get('maxRestarts', contract.DEFAULT_MAX_RESTARTS)} restarts used)",
        f"Phase:          {phase(mesh, pods)}",
        f"Ready:          {status.get('readyProcs', 0)}/{status.get('desiredProcs', spec_size(spec))}",
        f"Generation:     {meta.get('generation')} (status observed {status.get('observedGeneration', NONE)})",
    ]
    deleting = meta.get("deletionTimestamp")
    if deleting:  # its status is no longer kept current: what holds it matters, not the operator
        lines.append(f"Terminating:    since {deleting} ({age(deleting, now)} ago); "
                     f"finalizers left: {', '.join(meta.get('finalizers') or []) or NONE}")
        lines.append(f"Warning:        {assessing.TERMINATING}: {assessing.deletion(mesh)}")
    else:
        stale = assessing.stale_status(mesh, pods)
        if stale is not None:
            lines.append(f"Warning:        {stale[0]}: {stale[1]}")
    lines.append("Conditions:")
    rows = condition_rows(mesh, now)
    lines.append(render(CONDITIONS_HEADER, rows, "  ") if rows else f"  {NONE}")
    lines.append("Procs:")
    procs = proc_rows(mesh, pods, now)
    if pods is None:
        lines.append("  (pods not readable by this client: READY is the status's, STATE unknown)")
    lines.append(render(PROCS_HEADER, procs, "  ") if procs else f"  {NONE}")
    lines.append("Events:")
    if events is None:
        lines.append("  (events not readable by this client: 'list' on events in its namespace shows them)")
    else:
        rows = event_rows(events, now)
        lines.append(render(EVENTS_HEADER, rows, "  ") if rows else f"  {NONE}")
    return "\n".join(lines)


# --- top ---------------------------------------------------------------------------------------

#: NVIDIA_VISIBLE_DEVICES values that name no device (a proc without a GPU reports them).
NO_GPU = frozenset({"void", "none", ""})

TOP_HEADER = ["RANK", "POD", "GPU", "ALLOCATED", "RESERVED", "CAP", "RESERVED/CAP", "ACTORS"]


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f}Mi"


def top_row(proc: Mapping[str, Any], description: Mapping[str, Any] | None, error: str | None) -> list[str]:
    """One ``procmesh top`` row from the proc's own DESCRIBE answer (None: it did not answer)."""
    rank, pod = str(proc.get("rank")), str(proc.get("pod"))
    if description is None:
        return [rank, pod, str(proc.get("gpu") or "-"), "-", "-", "-", "-", f"unreachable: {error}"]
    memory = description.get("memory")
    gpu = str(description.get("gpu") or proc.get("gpu") or "-")
    if gpu.lower() in NO_GPU:  # the runtime's "no device" (a mesh without GPUs), not a device
        gpu = "-"
    actors = str(description.get("actors", "-"))
    if not memory:
        return [rank, pod, gpu, "-", "-", "-", "no CUDA in use", actors]
    cap = int(memory.get("cap") or memory.get("total") or 0)
    share = f"{memory['reserved'] / cap:.0%}" if cap else "-"
    return [rank, pod, gpu, mib(memory.get("allocated")), mib(memory.get("reserved")), mib(cap), share, actors]
