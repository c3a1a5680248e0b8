"""A proc's part in tree fan-out: deliver a FORWARD to its own actor, pass it on to its
children, and send one aggregated reply up for the whole subtree.

:mod:`.dispatch` hands FORWARD requests here on the reactor thread, in arrival order: this
proc's share goes to its actor's queue at once, as a CALL would, and the sends to children go
to one forwarding thread, which keeps that order; so one sender's messages keep their order
through every hop (the guarantee :mod:`mesh_client._src.actor.trees` builds on), and the
reactor never blocks on a child's connect or a full socket. Children are reached like any proc: a
:class:`~mesh_client._src.runtime.peers.Peer` authenticated with this mesh's token, so nothing
is unpickled from an unauthenticated connection on any hop.

A child whose connection drops fails its subtree at once: this proc replies up without
waiting for its other children, naming the dead proc (the controller turns that into
SupervisionError for the affected ranks).
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from mesh_client._src.actor import messages, trees
from mesh_client._src.runtime import ops, peers
from mesh_client._src.server.actors import reply
from mesh_client._src.wire import envelopes

if TYPE_CHECKING:
    from mesh_client._src.runtime.channel import Channel
    from mesh_client._src.server.dispatch import ProcServer

# (the parent's channel, its call id, the FORWARD's envelope, payload)
Forward = tuple["Channel", int, tuple[Any, ...], envelopes.Received]


class Forwarder:
    """One proc server's part in tree fan-out.

    Its own actor's share is queued for the actor at once, on the reactor thread (like a
    CALL: the actor's queue keeps the arrival order); the sends to its children go through one
    forwarding thread, in arrival order, started at the first FORWARD that has children.
    """

    def __init__(self, server: ProcServer) -> None:
        self._server = server
        self._queue: queue.SimpleQueue[tuple[tuple[Any, ...], tuple[Any, ...], envelopes.Received, bool, trees.Aggregate]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, work: Forward) -> None:
        """Deliver here, and queue the children's sends (on the reactor thread)."""
        channel, call_id, header, payload = work
        try:
            self._submit(channel, call_id, header, payload)
        except Exception as exc:  # a FORWARD we cannot read: its sender learns why
            reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))

    def _submit(self, channel: Channel, call_id: int, header: tuple[Any, ...], payload: envelopes.Received) -> None:
        fields, node = header[2], header[3]
        index, kids = node[0], node[4]
        wants_reply = call_id != peers.NO_REPLY
        aggregate = trees.Aggregate(
            (1 if index >= 0 else 0) + len(kids) if wants_reply else 0,
            functools.partial(self._answer, channel, call_id) if wants_reply else _ignore,
        )
        if index >= 0:
            self._deliver(fields, index, call_id, payload, aggregate)
        if kids:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="procmesh-forward", daemon=True)
                self._thread.start()
            self._queue.put((fields, kids, payload, wants_reply, aggregate))

    def _run(self) -> None:
        while True:
            fields, kids, payload, wants_reply, aggregate = self._queue.get()
            for child in kids:
                try:
                    self._send(fields, child, payload, wants_reply, aggregate)
                except Exception as exc:  # a bug here must fail the subtree, not hang the caller
                    message = f"forwarding to {child[3]} failed: {exc!r}"
                    aggregate.add([((i, peers.LOST, 0, message), []) for i in trees.subtree_indices(child)])

    def _send(self, fields: tuple[Any, ...], child: trees.WireNode, payload: envelopes.Received, wants_reply: bool,
              aggregate: trees.Aggregate) -> None:
        # child[5]: the proc the controller meant (its incarnation id): a stale address refuses
        peer = peers.get_peer((str(child[2][0]), int(child[2][1])), self._server.token, child[3], child[5])
        fut = peer.request((ops.FORWARD, fields, child), payload, _raw, reply=wants_reply)
        if wants_reply:
            fut.add_done_callback(functools.partial(_child_done, child, aggregate))

    def _deliver(self, fields: tuple[Any, ...], index: int, call_id: int, payload: envelopes.Received,
                 aggregate: trees.Aggregate) -> None:
        """This proc's own actor gets the call (or the stop), as a CALL (STOP_ACTOR) from the
        parent would reach it."""
        local_id = call_id if call_id == peers.NO_REPLY else 1
        collector = _Collector(index, aggregate)
        runner = self._server.actors.get(fields[0])
        if fields[1] is None:  # a stop: (actor_id, None, reason)
            if runner is None:
                collector.send(envelopes.encode_reply(local_id, peers.OK, []))
            else:
                runner.submit((local_id, cast("Channel", collector), (local_id, ops.STOP_ACTOR, fields[0], fields[2]), payload))
            return
        actor_id, method, labels, sizes = fields
        if runner is not None:
            runner.submit((local_id, cast("Channel", collector), (local_id, ops.CALL, actor_id, method, index, labels, sizes), payload))
        elif actor_id in self._server.ended:
            collector.send(envelopes.encode_reply(local_id, messages.DEAD, [self._server.ended[actor_id][0].encode()]))
        elif self._server.closing is not None:  # the proc shuts down (dispatch.close_actors)
            collector.send(envelopes.encode_reply(local_id, messages.DEAD, [self._server.closing.encode()]))
        else:
            error = LookupError(f"no actor {actor_id!r} in this proc; it was stopped or never spawned")
            collector.send(envelopes.encode_reply(local_id, peers.ERROR, messages.encode_failure(error)))

    def _answer(self, channel: Channel, call_id: int, status: int, payload: list[Any]) -> None:
        reply(channel, call_id, status, payload)


class _Collector:
    """Stands in for the caller's channel in the actor's reply: the reply becomes one entry."""

    def __init__(self, index: int, aggregate: trees.Aggregate) -> None:
        self._index = index
        self._aggregate = aggregate

    def send(self, segments: Sequence[Any]) -> None:
        status = envelopes.reply_status(segments)  # our own envelope (encode_reply), never a peer's bytes
        body = list(segments[1:])  # the result's own pickled buffers: no copy of a big value
        self._aggregate.add([((self._index, status, len(body), None), body)])


def _child_done(child: trees.WireNode, aggregate: trees.Aggregate, fut: Any) -> None:
    status, payload, extra = fut.peek_raw()
    if status == peers.LOST:
        peer: peers.Peer = extra
        if peer.verdict is not None and not peer.verdict.settled:  # never wait for it on the reactor thread
            threading.Thread(target=_child_lost, args=(child, aggregate, peer, payload), daemon=True,
                             name="procmesh-forward-lost").start()
        else:
            _child_lost(child, aggregate, peer, payload)
        return
    if status not in (peers.OK, trees.SUBTREE_LOST):  # the child refused it: every rank below raises that
        body = [bytes(s) for s in payload]
        aggregate.add([((i, status, len(body), None), body) for i in trees.subtree_indices(child)])
        return
    aggregate.add([trees.nested(payload)], lost=status == trees.SUBTREE_LOST)


def _child_lost(child: trees.WireNode, aggregate: trees.Aggregate, peer: peers.Peer, reason: str) -> None:
    """The link to ``child`` dropped: every rank of its subtree fails, saying whether the proc is
    gone or alive behind a broken link (:mod:`~mesh_client._src.runtime.relinking`)."""
    role = " (forwarding in the tree)" if child[4] else ""
    alive = peer.relinked() is not None
    message = f"{child[3]}{role}{':' if alive else ' failed:'} {peer.loss_message(reason)}"
    lost: list[tuple[trees.Entry, list[Any]]] = [((i, peers.LOST, 0, message), []) for i in trees.subtree_indices(child)]
    aggregate.add(lost)


def _raw(raw: Any) -> Any:
    return raw


def _ignore(status: int, payload: list[Any]) -> None:
    pass
