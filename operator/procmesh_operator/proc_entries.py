"""The ``status.procs`` entry of each rank, and a memo that recomputes only those whose pod changed.

A reconcile writes an entry for every rank of the mesh (:func:`proc_entry`), or the table that
encodes them (``contract.encode_proc_table``). A 4,096-proc mesh that is starting is reconciled
several times a second, and between two reconciles only the pods that had events changed.
:class:`EntryMemo` keeps each rank's entry with the version of the pod it came from (uid and
resourceVersion: a pod's content changes only with its resourceVersion), so a reconcile costs a
dictionary lookup per unchanged rank instead of reading the pod again. It keeps no pod.
:mod:`.reconciling` holds one memo per mesh; :func:`entries` without a memo is the same result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import assigned_gpus, planning, specs

#: What an entry is computed from, besides the mesh and the rank: the pod's uid and
#: resourceVersion (None: no pod), the claimed device (dra mode) and whether the proc is kept
#: failed with its pod deleted (:data:`planning.DELETED`).
_Version = tuple[str, str, str | None, bool] | tuple[None, None, str | None, bool]


def proc_entry(mesh: specs.MeshSpec, rank: int, pod: Mapping[str, Any] | None,
               claimed_gpu: str | None = None, deleted: bool = False) -> dict[str, Any]:
    """One ``status.procs[]`` entry: what a client needs to reach the proc. ``claimed_gpu``:
    dra mode, the device the scheduler allocated to the proc's claim request. ``deleted``: the
    proc's pod was deleted under it and its restart policy keeps it failed (a pod still
    terminating included): ``podPhase`` :data:`planning.DELETED`, which the next plan reads."""
    entry: dict[str, Any] = {"rank": rank, "coords": mesh.shape.coords(rank),
                             "pod": contract.pod_name(mesh.name, rank), "ready": False}
    if deleted:
        entry["podPhase"] = planning.DELETED
        return entry
    if pod is None:
        return entry
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName"):
        entry["node"] = spec["nodeName"]
    if status.get("podIP") and not planning.is_terminating(pod):
        entry["address"] = f"{status['podIP']}:{mesh.port}"
        # Which proc answers there: the pod's UID, its proc's incarnation (contract.INCARNATION).
        uid = (pod.get("metadata") or {}).get("uid")
        if uid:
            entry["podUID"] = str(uid)
    entry["ready"] = planning.is_ready(pod)
    entry["podPhase"] = "Terminating" if planning.is_terminating(pod) else planning.pod_phase(pod)
    gpu = claimed_gpu if mesh.gpus.mode == contract.GPU_MODE_DRA \
        else assigned_gpus.assigned_gpu(pod)
    if gpu is not None:
        entry["gpu"] = gpu
    return entry


def _version(pod: Mapping[str, Any] | None, claimed_gpu: str | None,
             deleted: bool) -> _Version:
    if pod is None:
        return None, None, claimed_gpu, deleted
    meta = pod.get("metadata") or {}
    return str(meta.get("uid", "")), str(meta.get("resourceVersion", "")), claimed_gpu, deleted


class EntryMemo:
    """The entries of one mesh as last computed, by rank, each with the pod version it came
    from. The entries handed out are shared with the next call's: callers must not change them."""

    def __init__(self) -> None:
        self._mesh: specs.MeshSpec | None = None
        self._by_rank: dict[int, tuple[_Version, dict[str, Any]]] = {}

    def entries(self, mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]],
                claimed_gpus: Mapping[int, str] | None = None,
                deleted: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
        """The entry of every rank of ``mesh`` (0 .. size-1), as :func:`entries` computes them."""
        if mesh != self._mesh:  # another spec (port, shape, size...): nothing carries over
            self._mesh, self._by_rank = mesh, {}
        claimed = claimed_gpus or {}
        by_rank = self._by_rank
        out: list[dict[str, Any]] = []
        size = mesh.size
        for rank in range(size):
            pod = pods.get(rank)
            version = _version(pod, claimed.get(rank), rank in deleted)
            known = by_rank.get(rank)
            if known is not None and known[0] == version:
                out.append(known[1])
                continue
            entry = proc_entry(mesh, rank, pod, claimed.get(rank), rank in deleted)
            by_rank[rank] = (version, entry)
            out.append(entry)
        return out


def entries(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]],
            claimed_gpus: Mapping[int, str] | None = None,
            deleted: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """The entry of every rank of ``mesh``, computed afresh."""
    return [proc_entry(mesh, r, pods.get(r), (claimed_gpus or {}).get(r), r in deleted)
            for r in range(mesh.size)]


def last_phases(status: Mapping[str, Any] | None) -> dict[int, str]:
    """Each rank's ``podPhase`` in a written status (``procs``, or for a big mesh the phase
    intervals of ``procTable``); ranks without one are left out."""
    status = status or {}
    table = status.get("procTable")
    if isinstance(table, Mapping):
        phases: dict[int, str] = {}
        for group in table.get("phases") or []:
            for rank in contract.parse_ranks(str(group.get("ranks") or "")):
                phases[rank] = str(group.get("phase"))
        return phases
    return {int(p["rank"]): str(p["podPhase"]) for p in status.get("procs") or []
            if isinstance(p, Mapping) and p.get("podPhase") and isinstance(p.get("rank"), int)}
