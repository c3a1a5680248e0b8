"""Watching the actors of a freshly spawned mesh on behalf of its owner.

For each actor, :func:`watch` sends one WATCH request; the proc server answers it only when the
actor ends: OK when it was stopped, DEAD with a report when it failed. A proc that dies fails the
request as LOST, which is a proc failure, unless only the link broke and the same proc answers
again (:mod:`~mesh_client._src.runtime.relinking`): then the watch starts again over the new
connection and nothing is reported. Each failure becomes a :class:`~.supervision.MeshFailure`
for the owner (:func:`~.supervision.report`); stops that the owner asked for are not failures, nor
is the end of a process the owner has since restarted (``reconnect``/``respawn``): it knew.
Decoding runs on the supervision thread, since explaining a lost proc may ask its backend.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from mesh_client._src.actor import messages, supervision
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import Shape
from mesh_client._src.runtime import futures, ops, peers

_CLOSED_BY_US = "closed by this client"


def watch(group: ProcGroup, shape: Shape, actor_id: str, name: str, cls: type, owner_id: str, creator: str,
          only: Collection[int] | None = None) -> None:
    """Start one watch per actor of the mesh (``only``: those of these mesh ranks, respawned);
    failures go to ``owner_id``."""
    sizes = dict(zip(shape.labels, shape.sizes))
    for point in shape.points():
        if only is not None and point.rank not in only:
            continue
        p = shape.ranks[point.rank]
        display = supervision.actor_display(creator, cls, name, dict(point), sizes)
        _watch_one(group, group.peers[p], p, point.rank, actor_id, display, owner_id)


def _watch_one(group: ProcGroup, peer: peers.Peer, p: int, index: int, actor_id: str, display: str, owner_id: str) -> None:
    incarnation = group.incarnations[p]

    def ended(f: futures.Future[Any]) -> None:
        at = time.monotonic()  # when the watch ended, before the supervision thread gets to it
        supervision.submit(lambda: _on_end(f, group, p, index, actor_id, display, owner_id, incarnation, at))

    peer.request((ops.WATCH, actor_id), (), _raw).add_done_callback(ended)


def _raw(raw: Any) -> Any:
    return raw


def _stopped_before(group: ProcGroup, p: int, ended_at: float) -> bool:
    """Whether the owner's stop of proc ``p`` began before the watch ended at ``ended_at``: the end
    was the stop's, not a failure. A crash that the stop came after is still reported, however
    late the supervision thread gets to it (it used to be dropped when the stop won that race)."""
    began = group.stopping.get(p)
    return began is not None and began <= ended_at


def _on_end(fut: futures.Future[Any], group: ProcGroup, p: int, index: int, actor_id: str, display: str, owner_id: str,
            incarnation: int, ended_at: float) -> None:
    status, data, extra = fut.get()
    if status == messages.DEAD:
        if _stopped_before(group, p, ended_at):  # the proc was shutting down at our own stop(): not a failure
            return
        report = messages.dead_report(data)
    elif status == peers.LOST:
        if _stopped_before(group, p, ended_at) or _CLOSED_BY_US in str(data):
            return
        successor = extra.relinked() if isinstance(extra, peers.Peer) else None  # waits (bounded)
        if successor is not None:  # the same proc, alive behind a broken link: watch it again
            if p not in group.stopping:
                _watch_one(group, successor, p, index, actor_id, display, owner_id)
            return
        why = extra.loss_message(data, peers.SUPERVISION_DETAIL_SECONDS) if isinstance(extra, peers.Peer) else str(data)
        report = supervision.failed_report(display, f"the process this actor was running on failed: {why}")
    else:  # OK: stopped on purpose; ERROR: a proc server that cannot watch
        return
    if group.incarnations[p] != incarnation:
        # The owner restarted the proc (reconnect/respawn) before this end of its old process was
        # reported: it knew already, and a late report would reach whatever runs by then.
        return
    supervision.report(owner_id, supervision.MeshFailure(actor_id, [index], report))
