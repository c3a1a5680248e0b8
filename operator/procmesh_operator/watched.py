"""The latest body of each ProcMesh, from its watch and from the operator's own status writes.

A reconcile reads its mesh from here instead of a fresh GET (one request per reconcile, and a
64-proc mesh is reconciled a dozen times while it starts). It is as current as a GET would be,
give or take the watch's latency, and a newer version always brings another event, hence another
reconcile (level-based). Kept newest-first by resourceVersion, so a late watch event cannot undo
the response of a status write. A mesh with no body here (an event of its pods came first, or
the resync expired it, :meth:`MeshBodies.expire`) is read with a GET. Fed and read by
:mod:`.reconciling`.
"""

from __future__ import annotations

import copy
import marshal
from collections.abc import Mapping
from typing import Any

Key = tuple[str, str]  # (namespace, mesh name)
#: Bound on remembered deleted uids (memory stays flat under churn).
MAX_GONE = 10000


def resource_version(body: Mapping[str, Any]) -> int:
    """The body's resourceVersion as a number (0 if absent or not numeric: then it never wins
    over a known one)."""
    raw = str((body.get("metadata") or {}).get("resourceVersion") or "0")
    return int(raw) if raw.isdigit() else 0


class MeshBodies:
    """The newest mesh body seen per key, with the uid it belongs to."""

    def __init__(self) -> None:
        self._bodies: dict[Key, dict[str, Any]] = {}
        # uids of meshes seen deleted, oldest first: a status write's response that arrives
        # after the DELETED event must not bring a deleted mesh back (its pods would be
        # recreated from it, and garbage-collected, forever).
        self._gone: dict[str, None] = {}
        # Meshes whose next reconcile reads them with a GET (:meth:`read_fresh_next`).
        self._fresh_next: set[Key] = set()

    def remember(self, key: Key, body: Mapping[str, Any]) -> None:
        """Keep ``body`` unless a newer version is known (of this incarnation, or of a mesh
        created again under its name: a late event of the earlier one must not replace it), or
        its incarnation was forgotten as deleted."""
        if uid_of(body) in self._gone:
            return
        current = self._bodies.get(key)
        if current is not None and resource_version(current) > resource_version(body):
            return  # resourceVersions grow cluster-wide: a late event of an earlier mesh loses too
        self._bodies[key] = dict(body)  # callers hand over a detached body (never a live view)

    def get(self, key: Key) -> dict[str, Any] | None:
        """A copy of the newest body of the mesh (the caller's to change), or None: read it with
        a GET."""
        body = self._bodies.get(key)
        if body is None:
            return None
        try:  # JSON: marshal copies it in C, several times faster than deepcopy
            copied: dict[str, Any] = marshal.loads(marshal.dumps(body))
        except ValueError:
            copied = copy.deepcopy(body)
        return copied

    def forget(self, key: Key, uid: str | None = None) -> None:
        """The mesh is gone: drop its body, and ignore any later body of its incarnation
        (``uid``). A body held of another incarnation than ``uid`` (or any body, when ``uid`` is
        not known: a GET found no mesh) stays: the mesh was created again under its name and
        read before the watch told of the earlier one's deletion. Burying it too made every
        later body of the live mesh ignored, and its reconciles end as if it were deleted (no
        phase kept, so no resync, and no requeue: a lease never expired, a deferred status
        never written)."""
        self._fresh_next.discard(key)
        held = self._bodies.get(key)
        if held is not None and uid_of(held) != uid:
            # Of another incarnation (or, with no uid known, a GET found none): a body held now
            # came after, of a mesh created again under the name. It stays, unburied.
            held = None
        else:
            self._bodies.pop(key, None)
        for gone in {uid, uid_of(held) if held is not None else None} - {None, ""}:
            assert gone is not None
            self._gone.pop(gone, None)
            self._gone[gone] = None
        while len(self._gone) > MAX_GONE:
            del self._gone[next(iter(self._gone))]

    def gone(self, uid: str) -> bool:
        """Whether the incarnation ``uid`` was forgotten as deleted."""
        return uid in self._gone

    def deleting(self, key: Key, uid: str) -> bool:
        """Whether the incarnation ``uid`` was seen deleted, or being deleted (its body held
        has a deletionTimestamp: a foreground deletion, a finalizer). No copy is made: this is
        asked before each pod create."""
        if uid in self._gone:
            return True
        held = self._bodies.get(key)
        return held is not None and uid_of(held) == uid and \
            bool((held.get("metadata") or {}).get("deletionTimestamp"))

    def clear(self) -> None:
        """Forget every body: the next reconcile of each mesh reads it fresh."""
        self._bodies.clear()

    def read_fresh_next(self, key: Key) -> None:
        """The mesh may have changed unseen (deleted, when garbage collection's work arrives
        before its own watch event): its next reconcile reads it with a GET. Unlike
        :meth:`expire`, the body stays for a reconcile in flight, whose status writes must
        build on its own earlier writes (a body dropped between two of them made the second
        fall back to the body read before the first, and be refused as superseded, its
        events lost)."""
        self._fresh_next.add(key)

    def take_fresh_next(self, key: Key) -> bool:
        """Whether the mesh is to be read fresh now (and clear that)."""
        if key in self._fresh_next:
            self._fresh_next.discard(key)
            return True
        return False

    def expire(self, key: Key) -> None:
        """Forget the body of one mesh (not as deleted): its next reconcile reads it fresh (the
        resync's check that nothing was missed)."""
        self._bodies.pop(key, None)

    def __len__(self) -> int:
        return len(self._bodies)


def uid_of(body: Mapping[str, Any]) -> str:
    """The incarnation a mesh body belongs to ("" if it names none)."""
    return str((body.get("metadata") or {}).get("uid", ""))
