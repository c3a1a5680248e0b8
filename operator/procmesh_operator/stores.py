"""An in-memory cache of proc pods, fed by kopf's pod watch and by the operator's own writes.

Reconciles read a mesh's pods from here instead of listing them every time (a 64-proc mesh sees
hundreds of pod events while starting). To stay correct:

* the first reconcile of a mesh lists its pods once (:meth:`PodStore.prime`);
* entries are only replaced by newer resourceVersions, so a late watch event cannot undo a write;
* the operator's own creates and deletes are written through (:meth:`upsert`, :meth:`forget`),
  and a pod deleted by us is tombstoned by uid, so its stale events are ignored.

Fed by :mod:`.handlers`, read by :mod:`.reconciling`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from procmesh_operator import names

Key = tuple[str, str]  # (namespace, mesh name)
MAX_TOMBSTONES = 10000


def _rv(body: Mapping[str, Any]) -> int:
    raw = str((body.get("metadata") or {}).get("resourceVersion") or "0")
    return int(raw) if raw.isdigit() else 0


def mesh_key_of(body: Mapping[str, Any]) -> Key | None:
    meta = body.get("metadata") or {}
    mesh = (meta.get("labels") or {}).get(names.MESH_LABEL)
    if not mesh:
        return None
    return str(meta.get("namespace", "default")), str(mesh)


class PodStore:
    """Proc pods by mesh, then by pod name."""

    def __init__(self) -> None:
        self._pods: dict[Key, dict[str, dict[str, Any]]] = {}
        self._tombstones: dict[str, None] = {}
        self._primed: set[Key] = set()

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> Key | None:
        """Apply one watch event; returns the mesh key it belongs to."""
        key = mesh_key_of(body)
        if key is None:
            return None
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self._tombstones.pop(uid, None)
            pods = self._pods.get(key, {})
            current = pods.get(str(meta.get("name")))
            if current is not None and (current.get("metadata") or {}).get("uid") == uid:
                del pods[str(meta.get("name"))]
            return key
        if uid in self._tombstones:
            return key
        self.upsert(body)
        return key

    def upsert(self, body: Mapping[str, Any]) -> None:
        """Store ``body`` unless a newer version of the same pod is already known."""
        key = mesh_key_of(body)
        if key is None:
            return
        name = str((body.get("metadata") or {}).get("name"))
        pods = self._pods.setdefault(key, {})
        current = pods.get(name)
        if current is not None and _rv(current) > _rv(body) and \
                (current.get("metadata") or {}).get("uid") == (body.get("metadata") or {}).get("uid"):
            return
        pods[name] = dict(body)

    def forget(self, namespace: str, mesh: str, name: str, uid: str) -> None:
        """The operator deleted this pod and it is gone: drop it and ignore its stale events."""
        pods = self._pods.get((namespace, mesh), {})
        current = pods.get(name)
        if current is not None and (current.get("metadata") or {}).get("uid") == uid:
            del pods[name]
        self._tombstones[uid] = None
        while len(self._tombstones) > MAX_TOMBSTONES:
            self._tombstones.pop(next(iter(self._tombstones)))

    def is_primed(self, key: Key) -> bool:
        return key in self._primed

    async def prime(self, key: Key,
                    lister: Callable[[], Awaitable[list[dict[str, Any]]]]) -> None:
        """List the mesh's pods once: events may have been missed before the operator started."""
        if key in self._primed:
            return
        listed = await lister()
        listed_names = {str((p.get("metadata") or {}).get("name")) for p in listed}
        pods = self._pods.setdefault(key, {})
        for name in [n for n in pods if n not in listed_names]:
            del pods[name]  # gone before we listed (a later ADDED would have a newer version)
        for pod in listed:
            self.upsert(pod)
        self._primed.add(key)

    def unprime(self, key: Key) -> None:
        """Forget a mesh (deleted): its pods go with it."""
        self._primed.discard(key)
        self._pods.pop(key, None)

    def pods_by_rank(self, key: Key) -> dict[int, dict[str, Any]]:
        """The mesh's pods keyed by rank (pods whose name is not ``<mesh>-<rank>`` are skipped)."""
        out: dict[int, dict[str, Any]] = {}
        for name, pod in self._pods.get(key, {}).items():
            rank = names.rank_of_pod_name(key[1], name)
            if rank is not None:
                out[rank] = pod
        return out
