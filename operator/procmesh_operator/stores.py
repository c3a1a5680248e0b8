"""An in-memory cache of proc pods, fed by kopf's pod watch and by the operator's own writes.

Reconciles read a mesh's pods from here instead of listing them every time (a 64-proc mesh sees
hundreds of pod events while starting). To stay correct:

* the first reconcile of a mesh lists its pods once (:meth:`PodStore.prime`);
* entries are only replaced by newer resourceVersions (they grow cluster-wide, so this holds
  across incarnations of one pod name too), so a late watch event cannot undo a write;
* a pod known to be deleted (its DELETED event, or our own delete that found it gone) is
  tombstoned by uid for :data:`TOMBSTONE_SECONDS`, and nothing brings that uid back: not a late
  MODIFIED event, not the DELETE response the operator upserts after the DELETED event was
  handled (issue 12, item 1: the "terminating" pod that no later event removed);
* :meth:`repair` applies a periodic relist (one list per namespace, not per event), dropping
  entries the list proves gone and adding ones a missed event would have brought;
* reads are by mesh *incarnation*: a mesh deleted and created again at once under the same name
  finds the old one's pods (same names, same label) until garbage collection removes them, so
  :meth:`PodStore.pods_by_rank` returns only the pods the given mesh uid controls.

Fed by :mod:`.handlers` (through :mod:`.reconciling`), read by :mod:`.reconciling`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import projections

Key = tuple[str, str]  # (namespace, mesh name)
#: How long a deleted pod's uid is remembered: far longer than any event or response can lag.
TOMBSTONE_SECONDS = 600.0
#: Bound on remembered uids, oldest dropped first (memory stays flat under churn).
MAX_TOMBSTONES = 10000


def _rv(body: Mapping[str, Any]) -> int:
    raw = str((body.get("metadata") or {}).get("resourceVersion") or "0")
    return int(raw) if raw.isdigit() else 0


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid", ""))


def mesh_key_of(body: Mapping[str, Any]) -> Key | None:
    meta = body.get("metadata") or {}
    mesh = (meta.get("labels") or {}).get(contract.MESH_LABEL)
    if not mesh:
        return None
    return str(meta.get("namespace", "default")), str(mesh)


class PodStore:
    """Proc pods by mesh, then by pod name."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:  # clock: for tests
        self._pods: dict[Key, dict[str, dict[str, Any]]] = {}
        self._tombstones: dict[str, float] = {}  # uid -> expiry, in insertion (= expiry) order
        self._primed: set[Key] = set()
        self._priming: dict[Key, int] = {}  # meshes whose first list is in flight (-> how many)
        self._clock = clock
        # key -> controller uid -> the mesh's pods by rank, until the next write to that mesh's
        # pods: a reconcile asks several times, and a big mesh has thousands of pods to sort.
        self._ranked: dict[Key, dict[str | None, dict[int, dict[str, Any]]]] = {}

    # --- Tombstones ----------------------------------------------------------------------------

    def _bury(self, uid: str) -> None:
        if not uid:
            return
        now = self._clock()
        self._tombstones.pop(uid, None)
        self._tombstones[uid] = now + TOMBSTONE_SECONDS
        while self._tombstones:  # the oldest first, without copying them (a relist buries many)
            old = next(iter(self._tombstones))
            if len(self._tombstones) <= MAX_TOMBSTONES and self._tombstones[old] > now:
                break
            del self._tombstones[old]

    def is_buried(self, uid: str) -> bool:
        """Whether ``uid`` was seen deleted (recently enough to be remembered)."""
        expiry = self._tombstones.get(uid)
        return expiry is not None and expiry > self._clock()

    def tombstones(self) -> int:
        return len(self._tombstones)

    # --- Writes --------------------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> Key | None:
        """Apply one watch event; returns the mesh key it belongs to. A pod of a mesh not
        primed (nor being primed) is not kept: the mesh's first reconcile lists its pods
        anyway, and pods that carry the label of no mesh (being deleted, or someone else's)
        must not fill the cache."""
        key = mesh_key_of(body)
        if key is None:
            return None
        if event_type == "DELETED":
            name = str((body.get("metadata") or {}).get("name"))
            self._drop(key, name, _uid(body))
            return key
        if key in self._primed or key in self._priming:
            self.upsert(body)
        return key

    def deletion_is_news(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """Whether this event is the first word of a kept pod's deletion: it is gone, or
        terminating, and the kept copy of it was not. A deletion the operator made itself is
        no news (its response is kept first); garbage collection's, after the mesh's own
        deletion, is."""
        meta = body.get("metadata") or {}
        if event_type != "DELETED" and not meta.get("deletionTimestamp"):
            return False
        key = mesh_key_of(body)
        if key is None:
            return False
        if key not in self._primed and key not in self._priming:
            return True  # nothing kept to tell: a mesh not reconciled yet by this process
        current = self._pods.get(key, {}).get(str(meta.get("name")))
        return (current is not None and _uid(current) == _uid(body)
                and not (current.get("metadata") or {}).get("deletionTimestamp"))

    def upsert(self, body: Mapping[str, Any]) -> None:
        """Store ``body`` unless its uid was seen deleted or a newer version is already known."""
        key = mesh_key_of(body)
        if key is None or self.is_buried(_uid(body)):
            return
        name = str((body.get("metadata") or {}).get("name"))
        pods = self._pods.setdefault(key, {})
        current = pods.get(name)
        if current is not None and _rv(current) > _rv(body):
            return  # resourceVersions grow cluster-wide: a newer incarnation wins over an old one
        pods[name] = _trimmed(body)
        self._changed(key)

    def _changed(self, key: Key) -> None:
        self._ranked.pop(key, None)

    def forget(self, namespace: str, mesh: str, name: str, uid: str) -> None:
        """The operator deleted this pod and it is gone: drop it and ignore its stale events."""
        self._drop((namespace, mesh), name, uid)

    def _drop(self, key: Key, name: str, uid: str) -> None:
        pods = self._pods.get(key, {})
        current = pods.get(name)
        if current is not None and _uid(current) == uid:
            del pods[name]
            self._changed(key)
        self._bury(uid)

    # --- Lists ---------------------------------------------------------------------------------

    def primed(self) -> list[Key]:
        return sorted(self._primed)

    async def prime(self, key: Key,
                    lister: Callable[[], Awaitable[list[dict[str, Any]]]]) -> None:
        """List the mesh's pods once: events may have been missed before the operator started."""
        if key in self._primed:
            return
        self._priming[key] = self._priming.get(key, 0) + 1  # events during the list are kept
        try:
            listed = await lister()
        finally:
            self._priming[key] -= 1
            if not self._priming[key]:
                del self._priming[key]
        listed_names = {str((p.get("metadata") or {}).get("name")) for p in listed}
        pods = self._pods.setdefault(key, {})
        for name in [n for n in pods if n not in listed_names]:
            del pods[name]  # gone before we listed (a later ADDED would have a newer version)
            self._changed(key)
        for pod in listed:
            self.upsert(pod)
        self._primed.add(key)

    def repair(self, namespace: str, listed: Iterable[Mapping[str, Any]],
               list_rv: int) -> set[Key]:
        """Reconcile the store with a list of every proc pod of ``namespace`` taken at
        resourceVersion ``list_rv``; returns the primed meshes whose pods changed.

        An entry absent from the list and not newer than it is gone (a missed DELETED event);
        a listed pod replaces an older entry (a missed MODIFIED/ADDED). Entries newer than the
        list came from events after it and are kept."""
        by_key: dict[Key, dict[str, Mapping[str, Any]]] = {}
        for pod in listed:
            key = mesh_key_of(pod)
            if key is not None and key[0] == namespace:
                by_key.setdefault(key, {})[str((pod.get("metadata") or {}).get("name"))] = pod
        changed: set[Key] = set()
        for key in [k for k in self._primed if k[0] == namespace]:
            pods = self._pods.setdefault(key, {})
            seen = by_key.get(key, {})
            for name in [n for n, p in pods.items() if n not in seen and _rv(p) <= list_rv]:
                self._bury(_uid(pods.pop(name)))  # an older list in flight must not bring it back
                self._changed(key)
                changed.add(key)
            for name, pod in seen.items():
                before = pods.get(name)
                self.upsert(pod)
                after = pods.get(name)
                if after is not None and (before is None or _rv(before) != _rv(after)):
                    changed.add(key)
        return changed

    def unprime(self, key: Key) -> None:
        """Forget a mesh (deleted): its pods go with it."""
        self._primed.discard(key)
        self._pods.pop(key, None)
        self._changed(key)

    # --- Reads ---------------------------------------------------------------------------------

    def nodes_in_use(self) -> set[str]:
        """The nodes with a pod of ours bound to them (one scan, at a resync pass)."""
        return {str(node) for pods in self._pods.values() for p in pods.values()
                if (node := (p.get("spec") or {}).get("nodeName"))}

    def meshes_on_node(self, node: str) -> set[Key]:
        """Meshes with a pod bound to ``node`` (scanned on node transitions only, not per event)."""
        return {key for key, pods in self._pods.items()
                if any((p.get("spec") or {}).get("nodeName") == node for p in pods.values())}

    def pods_by_rank(self, key: Key, owner_uid: str) -> dict[int, dict[str, Any]]:
        """The pods of the mesh incarnation ``owner_uid`` keyed by rank (pods whose name is not
        ``<mesh>-<rank>`` are skipped). A pod of the same name and label controlled by another
        uid is not this mesh's proc (an earlier mesh of this name, being garbage-collected):
        see :meth:`foreign_by_rank`."""
        return dict(self._by_owner(key).get(owner_uid, {}))  # callers may change their copy

    def foreign_by_rank(self, key: Key, owner_uid: str) -> dict[int, dict[str, Any]]:
        """Pods with the mesh's label and a rank's name not controlled by ``owner_uid``: they
        hold a name this incarnation needs, so it waits for them to go."""
        out: dict[int, dict[str, Any]] = {}
        for owner, pods in self._by_owner(key).items():
            if owner != owner_uid:
                out.update(pods)
        return out

    def _by_owner(self, key: Key) -> dict[str | None, dict[int, dict[str, Any]]]:
        """Every pod of the mesh by controller uid, then rank, in one pass over them (not to be
        changed: cached until the next write)."""
        out = self._ranked.get(key)
        if out is None:
            out = {}
            for name, pod in self._pods.get(key, {}).items():
                rank = contract.rank_of_pod_name(key[1], name)
                if rank is not None:
                    out.setdefault(controller_uid(pod), {})[rank] = pod
            self._ranked[key] = out
        return out


def _trimmed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as kept: only the fields the operator reads (:func:`projections.slim_pod`), so
    no ``managedFields``, defaulted fields or image IDs. At thousands of pods the cache is most
    of the operator's memory."""
    return projections.slim_pod(body)


def other_procs(pods: Iterable[dict[str, Any]], key: Key, owner_uid: str
                ) -> list[dict[str, Any]]:
    """The proc pods that are not the mesh incarnation ``owner_uid``'s own: other meshes', and
    an earlier incarnation's of the same name, whose procs may still hold their devices while
    they terminate (the GPU budget counts them, :func:`placing.holds_device`)."""
    return [p for p in pods if mesh_key_of(p) != key or controller_uid(p) != owner_uid]


def controller_uid(body: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller (its ownerReference with ``controller: true``)."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return None
