"""Tree fan-out: calls to a big mesh travel through its procs instead of one loop here.

On a big mesh the controller's flat loop (one send and one reply per proc, all on this
process's cores) can be what limits ``call()``. A group of at least
:attr:`~.options.Options.tree_fanout_min` procs (by default :mod:`.tree_policy` decides)
routes every endpoint message through a fixed
k-ary tree of its own procs (Monarch casts through a tree of procs the same way): the
controller sends one FORWARD to each of at most k procs, each delivers to its own actor and
forwards to its children (:mod:`mesh_client._src.server.forwarding`), and each subtree's
replies come back as one aggregated reply.

Ordering (Monarch's guarantee: one sender's messages to one actor arrive in order): the tree
is fixed per group, over the group's ranks, not per slice, and whether an actor mesh is
tree-routed at all, and with which branching, is fixed per actor mesh when it is spawned (in
another process: at its first message from there; :func:`branching`), so changing
``options.tree_fanout_min`` or ``tree_branching`` later applies to meshes spawned later, never
to messages in flight. So every endpoint message from this sender to proc ``r`` (call,
call_one, choose, stream, broadcast, on any slice) takes the same path of FIFO connections,
each hop forwarding in arrival order on one thread; nothing can overtake (a message sent flat
after one through the tree could: a broadcast has no reply to wait for). The cost is that a ``call_one`` on a tree-routed mesh takes ``depth(r)`` hops.
Stopping an actor mesh takes the tree too (its stop cannot overtake the calls before it);
spawns stay direct, so a tree-routed call waits for its mesh's spawn replies first.

Replies come back per top-level subtree, so ``stream()`` on a tree-routed mesh yields its
futures in batches (each subtree's, in the order the subtrees complete).

Supervision: a forwarder whose child's connection drops replies at once with that subtree
marked lost, naming the dead proc; the controller's own link to a top-level proc failing does
the same for its subtree. Each affected rank's future raises SupervisionError.

Shapes are pure functions here (unit-tested); this module also encodes the wire form of a
pruned tree and of an aggregated reply, which the forwarder shares.
"""

from __future__ import annotations

import functools
import pickle
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mesh_client._src.actor import messages, restarts, tree_policy
from mesh_client._src.actor.errors import ConnectionBroken, SupervisionError
from mesh_client._src.actor.options import options
from mesh_client._src.runtime import futures, ops, peers, relinking

if TYPE_CHECKING:
    from mesh_client._src.actor.actor_mesh import ActorMesh
    from mesh_client._src.actor.procs import ProcGroup

# A FORWARD reply's status when part of the subtree is lost (beside OK; never ERROR/DEAD,
# those are per rank inside the table).
SUBTREE_LOST = 5
# An entry's status for a child's whole reply carried as it came (its own table and segments):
# a forwarder passes its children's replies up without opening them, so each level costs
# O(k), not O(subtree); the controller flattens them.
NESTED = 6

GONE = "gone"  # a LOST future's third field: its actor died with an earlier incarnation of its proc

# Wire form of a tree node: (index in the slice or -1 to forward only, proc rank in the group,
# (host, port), display, children, incarnation id or None: the proc a forwarder's handshake
# names, wire/binding.py). Plain tuples: one pickle per hop, no classes to trust.
WireNode = tuple[int, int, tuple[str, int], str, tuple[Any, ...], str | None]
# One rank's outcome in an aggregated reply: (index, status, number of payload segments, message).
Entry = tuple[int, int, int, str | None]


# Shape (pure) -----------------------------------------------------------------------------


def top(n: int, k: int) -> list[int]:
    """The ranks the controller sends to: the first ``k`` (all of them when ``n <= k``)."""
    return list(range(min(n, k)))


def children(rank: int, n: int, k: int) -> list[int]:
    """Children of ``rank`` in the k-ary tree over ranks ``0..n-1`` rooted at the controller
    (heap order: the controller is the virtual node -1, so rank r's children are
    ``k*(r+1) .. k*(r+1)+k-1``)."""
    first = k * (rank + 1)
    return list(range(first, min(n, first + k)))


def parent(rank: int, k: int) -> int:
    """The rank that forwards to ``rank``; -1 for the controller."""
    return rank // k - 1


def path(rank: int, k: int) -> list[int]:
    """The procs a message to ``rank`` passes through, first hop first, ``rank`` last."""
    hops = [rank]
    while (up := parent(hops[-1], k)) >= 0:
        hops.append(up)
    return hops[::-1]


def depth(n: int, k: int) -> int:
    """Hops from the controller to the deepest rank (1 when the controller reaches all)."""
    return len(path(n - 1, k)) if n else 0


def prune(targets: Iterable[int], k: int) -> dict[int, list[int]]:
    """The tree restricted to the paths to ``targets``: node -> its children on those paths
    (node -1 is the controller). Interior procs that are not targets still forward."""
    kids: dict[int, set[int]] = {}
    for rank in set(targets):
        hop = -1
        for node in path(rank, k):
            kids.setdefault(hop, set()).add(node)
            hop = node
    return {node: sorted(below) for node, below in kids.items()}


def wire_nodes(
    kids: dict[int, list[int]],
    index_of: dict[int, int],
    addresses: Sequence[tuple[str, int]],
    displays: Sequence[str],
    proc_ids: Sequence[str | None] | None = None,
) -> list[WireNode]:
    """The controller's top-level nodes of a pruned tree, each with its subtree, as sent."""
    ids = proc_ids if proc_ids is not None else [None] * len(addresses)

    def node(rank: int) -> WireNode:
        return (
            index_of.get(rank, -1),
            rank,
            addresses[rank],
            displays[rank],
            tuple(node(c) for c in kids.get(rank, ())),
            ids[rank],
        )

    return [node(r) for r in kids.get(-1, ())]


def subtree_indices(node: WireNode) -> list[int]:
    """Slice indices delivered in ``node``'s subtree."""
    out = [node[0]] if node[0] >= 0 else []
    for child in node[4]:
        out.extend(subtree_indices(child))
    return out


# Aggregated replies (both sides) ------------------------------------------------------------


def encode_table(entries: Sequence[tuple[Entry, Sequence[Any]]]) -> list[Any]:
    """A FORWARD reply's payload: the pickled entry table, then each entry's segments."""
    table = [e for e, _ in entries]
    segments: list[Any] = [pickle.dumps(table, protocol=5)]
    for _, segs in entries:
        segments.extend(segs)
    return segments


def decode_table(payload: Sequence[Any]) -> list[tuple[Entry, list[Any]]]:
    """The inverse of :func:`encode_table`, with NESTED entries flattened (read only from an
    authenticated peer)."""
    if not payload:
        return []
    table: list[Entry] = pickle.loads(payload[0])
    out = []
    at = 1
    for entry in table:
        segments = list(payload[at : at + entry[2]])
        at += entry[2]
        if entry[1] == NESTED:
            out.extend(decode_table(segments))
        else:
            out.append((entry, segments))
    return out


def nested(payload: Sequence[Any]) -> tuple[Entry, Sequence[Any]]:
    """A child's FORWARD reply as one entry of its parent's table."""
    return ((-1, NESTED, len(payload), None), payload)


# Routing (controller side) ------------------------------------------------------------------


# Actor id -> the branching of the tree its messages from this process take (0: flat).
_routes: dict[str, int] = {}
_routes_lock = threading.Lock()


def fix_route(actor_id: str, group: ProcGroup) -> int:
    """Decide once, from the options now, how messages to actor mesh ``actor_id`` travel
    from this process (at its spawn); its branching, 0 for flat."""
    k = options.tree_branching if tree_policy.takes_tree(group.addresses, options.tree_fanout_min) else 0
    with _routes_lock:
        return _routes.setdefault(actor_id, k)


def forget_route(actor_id: str) -> None:
    """The actor mesh was stopped: nothing is left to keep in order."""
    with _routes_lock:
        _routes.pop(actor_id, None)


def branching(mesh: ActorMesh[Any]) -> int:
    """The branching of the tree ``mesh``'s messages take from here, 0 for flat: fixed at its
    spawn (:func:`fix_route`), or at its first message for a mesh received from elsewhere."""
    k = _routes.get(mesh._actor_id)
    return k if k is not None else fix_route(mesh._actor_id, mesh._group)


def routed(mesh: ActorMesh[Any]) -> bool:
    """Whether endpoint messages to ``mesh`` go through the tree (fixed per actor mesh)."""
    return branching(mesh) > 0


def send(
    mesh: ActorMesh[Any],
    method: str | None,
    what: str,
    indices: Sequence[int],
    payload: Sequence[Any],
    reply: bool,
    reason: str = "",
    key: Hashable | None = None,
) -> list[futures.Future[Any]]:
    """One future per index of ``mesh``'s slice, the messages sent through the group's tree;
    ``method=None`` stops the actors (``reason``), behind every message sent them before;
    ``key``: the futures' (:class:`~mesh_client._src.runtime.futures.Future`)."""
    group, shape = mesh._group, mesh._shape
    spawned = mesh._spawned
    if spawned is not None and not spawned.done():
        spawned.exception()  # spawns go direct: the actors must exist before a forwarded call
    k = branching(mesh)
    outs: dict[int, futures.Future[Any]] = {
        i: futures.Future(functools.partial(_decode, what, group.displays[shape.ranks[i]]), key) for i in indices
    }
    born = group.born.get(mesh._actor_id)
    index_of = {}
    for i in indices:
        p = shape.ranks[i]
        if born is not None and born[p] != group.incarnations[p]:  # its actor died with the old proc
            outs[i].set_raw((peers.LOST, restarts.gone_message(group, p, mesh._name), GONE))
        else:
            index_of[p] = i
    fields = (mesh._actor_id, method, shape.labels, shape.sizes) if method is not None else (mesh._actor_id, None, reason)
    for node in wire_nodes(prune(index_of, k), index_of, group.addresses, group.displays, group.proc_ids):
        fut = group.peers[node[1]].request((ops.FORWARD, fields, node), payload, _raw, reply=reply)
        mine = subtree_indices(node)
        if not reply:
            for i in mine:
                outs[i].set_raw((peers.OK, None, None))
            continue
        fut.add_done_callback(functools.partial(_spread, node, mine, outs))
    return [outs[i] for i in indices]


def _raw(raw: Any) -> Any:
    return raw


def _spread(node: WireNode, mine: list[int], outs: dict[int, futures.Future[Any]], fut: futures.Future[Any]) -> None:
    """A top-level FORWARD came back: complete its subtree's futures (lost ones first, so a
    gather fails fast with the dead proc's name)."""
    status, payload, extra = fut.peek_raw()
    if status == peers.LOST:  # how it died is asked for in the caller's thread (_decode), as peers says
        for i in mine:
            outs[i].set_raw((peers.LOST, payload, (extra, node[3], len(mine))))
        return
    if status not in (peers.OK, SUBTREE_LOST):  # the forwarder refused it (an ERROR): each rank raises it
        for i in mine:
            outs[i].set_raw((status, payload, extra))
        return
    entries = decode_table(payload)
    lost = [(e, segs) for e, segs in entries if e[1] == peers.LOST]
    seen: set[int] = set()
    for entry, segs in lost + [x for x in entries if x[0][1] != peers.LOST]:
        index, st, _, note = entry
        if index not in outs:
            continue
        seen.add(index)
        outs[index].set_raw((st, note if st == peers.LOST else segs, None))
    if status == SUBTREE_LOST:
        reason = (lost[0][0][3] if lost else None) or f"a proc under {node[3]} failed"
        for i in mine:
            if i not in seen:
                outs[i].set_raw((peers.LOST, reason, None))


def _decode(what: str, where: str, raw: tuple[int, Any, Any]) -> Any:
    status, data, extra = raw
    if status == peers.LOST and extra == GONE:  # as the flat loop words it (actor_mesh._send)
        raise SupervisionError(f"{messages.endpoint_call(what)} failed: {data}")
    if status == peers.LOST:
        if isinstance(extra, tuple):  # our own link to a top-level proc dropped
            peer, display, ranks = extra
            role = f" (forwarding to {ranks} ranks of the tree)" if ranks > 1 else ""
            if peer.relinked() is not None:  # the proc lives on: only our link to it broke
                raise ConnectionBroken(f"{messages.endpoint_call(what)} failed: {display}{role}: {peer.loss_message(data)}")
            data = f"{display}{role} failed: {peer.loss_message(data)}"
        elif relinking.says_alive(str(data)):  # a forwarder's link to a live proc broke
            raise ConnectionBroken(f"{messages.endpoint_call(what)} failed, through the tree: {data}")
        raise SupervisionError(f"{messages.endpoint_call(what)} failed, the process this actor was running on, or one forwarding to it, failed: {data}")
    return messages.decode_reply(what, where, raw)


# Aggregation (forwarder side, here so both sides share one definition) ----------------------


class Aggregate:
    """Collects the entries of one subtree; calls ``done(status, payload)`` exactly once: when
    all ``expected`` parts arrived, or at once when one part is lost."""

    def __init__(self, expected: int, done: Callable[[int, list[Any]], None]) -> None:
        self._expected = expected
        self._done = done
        self._entries: list[tuple[Entry, Sequence[Any]]] = []
        self._lock = threading.Lock()
        self._finished = expected == 0
        if self._finished:
            done(peers.OK, encode_table([]))

    def add(self, entries: Sequence[tuple[Entry, Sequence[Any]]], lost: bool | None = None) -> None:
        """One part: this proc's own entry, or a child's (``lost``: part of it is lost; by
        default, whether one of ``entries`` says so)."""
        if lost is None:
            lost = any(e[1] == peers.LOST for e, _ in entries)
        with self._lock:
            if self._finished:
                return
            self._entries.extend(entries)
            self._expected -= 1
            if not lost and self._expected > 0:
                return
            self._finished = True
            collected = self._entries
        self._done(SUBTREE_LOST if lost else peers.OK, encode_table(collected))
