"""Proc servers as a client sees them: one lazily connected :class:`Peer` per address, token
and proc meant (its incarnation id, named in every handshake: :mod:`mesh_client._src.wire.binding`).

A peer numbers its requests, keeps the futures of those in flight, resolves them from the
reactor when replies arrive, and fails every one of them at once when the connection drops,
so a dead proc never leaves a caller hanging. Used by the actor layer for every call.

How the proc died (its exit status, from the launcher or the API server) is added to a failed
call's message only if it is learnt within :data:`LOSS_DETAIL_SECONDS` of the dropped
connection: the caller's error never waits longer for the details (issue 12, item 4).

A link that breaks under a proc that is still alive is not a lost proc (:mod:`.relinking`): the
peer asks the proc who it is again, and if it is the same process, a successor peer takes over
(the groups that hold this one swap it in, calls made on this one go to it); the calls that were
in flight still fail, saying so.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from mesh_client._src import contract
from mesh_client._src.runtime import channel as channel_mod
from mesh_client._src.runtime import (
    coalescing,
    exiting,
    futures,
    ops,
    relinking,
    streams,
    unixlinks,
)
from mesh_client._src.runtime import reactor as reactor_mod
from mesh_client._src.wire import binding, envelopes, packing
from mesh_client._src.wire import errors as wire_errors

# Reply status codes and the one-way call id, defined with the envelopes they travel in.
OK = envelopes.OK
ERROR = envelopes.ERROR
LOST = envelopes.LOST
NO_REPLY = envelopes.NO_REPLY

_ids = itertools.count(1)
_WATCH = ops.WATCH
# Looked up once: these run for every call.
_request_frame = packing.request_frame
_REQUEST_FIXED = envelopes.REQUEST_HEAD.size
_reply_head = envelopes.reply_head
_CLOSED = channel_mod.ChannelState.CLOSED

#: How long after the connection dropped a failed call may wait to learn how its proc died.
LOSS_DETAIL_SECONDS = 0.03
#: The same for a supervision report (a watched actor's proc is gone): no caller waits on it,
#: and the report is what a user reads to learn why, so it waits longer for the exit status
#: (a loaded machine reports a forked proc's exit later than 30 ms).
SUPERVISION_DETAIL_SECONDS = 1.0
#: How long a call that found its channel closed waits for the close handler to fail the
#: watches (it runs right after the close, on the closing thread).
WATCHES_FAILED_WAIT_SECONDS = 5.0
#: How long a large call on a new link waits for IDENTIFY to tell the proc's message limit.
IDENTIFY_WAIT_SECONDS = 10.0


def is_lost(fut: futures.Future[Any]) -> bool:
    """Whether a request's future completed because its proc's connection dropped."""
    raw = fut.peek_raw()
    return isinstance(raw, tuple) and len(raw) == 3 and raw[0] == LOST

Address = tuple[str, int]
Segments = Sequence[bytes | bytearray | memoryview]


class RelinkListener(Protocol):
    """Told when a peer's successor reaches the same proc again (a ProcGroup swaps it in)."""

    def peer_relinked(self, old: Peer, new: Peer) -> None: ...


class Waiter(Protocol):
    """What a peer completes when a reply comes: a :class:`~.futures.Future`, or one slot of a
    :class:`~.gathering.Gather`."""

    def set_raw(self, raw: Any) -> bool: ...


def meaning(proc_id: str | None, display: str) -> binding.ProcId | None:
    """The proc a handshake names, from its incarnation id (None: any proc of the mesh)."""
    return None if proc_id is None else binding.ProcId(proc_id, display)


class Peer:
    """One proc server: connect on first use, fail everything pending when the link drops."""

    def __init__(self, address: Address, token: bytes, display: str, opener: channel_mod.Opener | None = None,
                 meant: binding.ProcId | None = None) -> None:
        self.address = address
        self.meant = meant  # the proc every handshake names; None: any proc of the mesh answers
        self._opener = opener or unixlinks.open_stream  # AF_UNIX to a local proc that has a socket, else TCP
        self.display = display
        self._token = token
        self._channel: channel_mod.Channel | None = None
        self._unix_link = False  # connected to the proc's unix socket file (then probed there only)
        self._connect_lock = threading.Lock()
        self._pending: dict[int, Waiter] = {}
        self._watches: set[int] = set()  # the call ids in _pending of WATCH requests
        self.lost: str | None = None  # why the connection ended, once it has (its watches failed by then)
        self._watches_failed = threading.Event()  # the close handler failed the watches
        self._failing_thread: int | None = None  # the thread failing them
        self.lost_at: float | None = None  # when (time.monotonic()) it ended
        # Whether the proc's side ended the link (end of stream, a reset: its kernel answered),
        # not a timeout or unreachable network: a proc that did is not "cut off".
        self.peer_left = False
        # Asked lazily, in the caller's thread, when a call fails because the link dropped:
        # (reason, deadline on time.monotonic()) -> message; it must not wait past the deadline.
        self.explain_loss: Callable[[str, float], str] | None = None
        self.identity: Mapping[str, Any] | None = None  # what IDENTIFY said on this connection
        self.max_message: int | None = None  # the largest message the proc accepts, once known
        self._identified = threading.Event()  # IDENTIFY answered (or failed) on this connection
        self.verdict: relinking.Verdict | None = None  # set when the link broke (not closed by us)
        # Who to tell when a successor reaches the same proc (a ProcGroup swaps it in).
        # Held weakly, so a listener is gone with its owner: every actor-mesh reference a
        # process unpickles makes a group that follows its peers, and a list kept them all.
        self.on_relinked: weakref.WeakSet[RelinkListener] = weakref.WeakSet()

    def __repr__(self) -> str:
        state = "lost" if self.lost else ("connected" if self._channel else "new")
        return f"<Peer {self.display} {self.address[0]}:{self.address[1]} {state}, {len(self._pending)} pending>"

    def _get_channel(self) -> channel_mod.Channel:
        channel = self._channel
        if channel is not None:
            return channel
        with self._connect_lock:
            fresh = self._channel is None
            if fresh:
                if self.lost:
                    raise channel_mod.ChannelClosed(self.lost)
                self._channel = channel_mod.connect(
                    self.address,
                    self._token,
                    on_message=self._on_message,
                    on_messages=self._on_messages,
                    on_closed=self._on_closed,
                    display=self.display,
                    opener=self._open,
                    meant=self.meant,
                )
            channel = self._channel
            assert channel is not None
        if fresh and self.identity is None:
            self._learn_identity()
        return channel

    def _open(self, address: Address, timeout: float) -> streams.SocketStream:
        """The opener's stream, noting whether it reached the proc's unix socket file; refused
        for a local proc of this mesh that has ended (:func:`.unixlinks.buried_for`)."""
        if unixlinks.buried_for(address, self._token):
            raise ConnectionRefusedError(
                f"{self.display} has ended (its unix socket is buried); its TCP port "
                f"{address[0]}:{address[1]} is not dialled: another process may hold it now")
        stream = self._opener(address, timeout)
        self._unix_link = unixlinks.via_socket_file(stream, address)
        return stream

    def _key(self) -> tuple[Address, bytes, str | None]:
        """This peer's key among the shared ones (:func:`get_peer`)."""
        return (self.address, self._token, self.meant.incarnation if self.meant is not None else None)

    def connect(self) -> None:
        """Connect now (raises on refusal or a wrong token)."""
        self._get_channel()

    def request(
        self,
        header: tuple[Any, ...],
        payload: Segments,
        decode: Callable[[Any], Any],
        *,
        reply: bool = True,
    ) -> futures.Future[Any]:
        """Send ``(call_id, *header)`` and ``payload``; the future decodes ``(status, segments, peer)``."""
        fut: futures.Future[Any] = futures.Future(decode)
        lost = self.submit(fut if reply else None, header[0], envelopes.request_fields(header[1:]), payload)
        if not reply:
            fut.set_raw((OK, None, None) if lost is None else lost)
        return fut

    def submit(self, waiter: Waiter | None, op: int, fields: bytes, payload: Segments) -> tuple[int, str, Peer] | None:
        """Send a request whose fields were encoded once (:func:`envelopes.request_fields`);
        ``waiter.set_raw`` gets ``(status, segments, peer)`` when its reply (or the loss of the
        connection) comes. ``None``: a one-way message, nobody waits. Returns the LOST outcome
        if it could not be sent (the waiter has it too), else None."""
        if self.lost:
            successor: Peer | None = self.verdict.successor if self.verdict is not None else None
            if successor is not None:  # the same proc, over a new connection
                return successor.submit(waiter, op, fields, payload)
            lost = (LOST, relinking.NOT_SENT + self.lost if self.verdict else self.lost, self)
            if waiter is not None:
                waiter.set_raw(lost)
            return lost
        call_id = NO_REPLY if waiter is None else next(_ids)
        # A caller issuing calls back to back while earlier ones are still in flight (watches,
        # which stay pending for an actor's life, do not count): this frame may wait a little
        # (coalescing.HOLD_SECONDS at most) to go out with the next ones in one write. Else it
        # goes out now, from this thread: a call that is waited for has its latency unchanged.
        pending = self._pending
        hold = coalescing.sending() and len(pending) > len(self._watches)
        if waiter is not None:
            pending[call_id] = waiter
            if op == _WATCH:
                self._watches.add(call_id)
        try:
            channel = self._channel or self._get_channel()
            limit = self.max_message
            if limit is None:  # not known yet, or none: the limit is written before identity
                if self.identity is None and not self._identified.is_set():
                    limit = self.max_message or self._limit_once_known(fields, payload)
                else:
                    limit = self.max_message  # read again after identity
            if limit is not None and (len(payload) != 1 or _REQUEST_FIXED + len(fields) + len(payload[0]) > limit):
                self._refuse_beyond(limit, fields, payload)
            channel.send_frame(_request_frame(call_id, op, fields, payload), hold)
        except (OSError, channel_mod.ChannelClosed) as exc:
            self._pending.pop(call_id, None)
            self._watches.discard(call_id)
            self._await_failed_watches()
            # Its frame never went out whole, so the proc did not run it: said as for a call
            # made after the break (relinking.NOT_SENT), not "may or may not have run".
            reason: str | None = self.lost  # set by the close handler meanwhile (mypy kept the check above)
            if reason is None:
                reason = f"cannot reach {self.display}: {exc}"
            elif self.verdict is not None:
                reason = relinking.NOT_SENT + reason
            lost = (LOST, reason, self)
            if waiter is not None:
                waiter.set_raw(lost)
            return lost
        except BaseException:  # a Ctrl-C while sending: the caller gets no future to wait on
            self._pending.pop(call_id, None)
            self._watches.discard(call_id)
            raise
        if waiter is not None and self.lost:  # the link dropped between registering and sending
            self._fail_pending()
        return None

    def _on_message(self, channel: channel_mod.Channel, segments: envelopes.Received) -> None:
        call_id, status = _reply_head(segments)  # MalformedMessage closes the channel
        waiter = self._pending.pop(call_id, None)
        if self._watches:
            self._watches.discard(call_id)
        if waiter is not None:
            waiter.set_raw((status, segments[1:], self))

    def _on_messages(self, channel: channel_mod.Channel, batch: list[envelopes.Received]) -> None:
        """The replies of one read, in order: :meth:`_on_message` for each, in one loop."""
        pending, watches = self._pending, self._watches
        for segments in batch:
            call_id, status = _reply_head(segments)  # MalformedMessage closes the channel
            waiter = pending.pop(call_id, None)
            if watches:
                watches.discard(call_id)
            if waiter is not None:
                waiter.set_raw((status, segments[1:], self))
                if channel.state is _CLOSED:  # a done callback closed it: nothing more is read
                    return

    def _on_closed(self, channel: channel_mod.Channel, reason: str) -> None:
        self.lost_at = time.monotonic()
        self.peer_left = channel.close_kind is channel_mod.CloseKind.PEER_LEFT
        if channel.close_kind in (channel_mod.CloseKind.PEER_LEFT, channel_mod.CloseKind.IO_ERROR):
            self.verdict = verdict = relinking.Verdict()  # before the calls fail: their errors wait for it
            # A unix link is probed over unix only: see unixlinks.open_unix.
            probe = unixlinks.open_unix if self._unix_link else self._opener
            try:
                relink = threading.Thread(target=self._relink, args=(verdict, probe), name=f"procmesh-relink-{self.display}",
                                          daemon=True)
                exiting.track(relink, _no_halt)  # it may open a port-forward (TLS): bounded, waited for at exit
                relink.start()
            except RuntimeError:  # the interpreter is exiting: no new threads
                verdict.settle(None, "this process is exiting")
        # The watches fail before ``lost`` is set, and a call whose send found the channel
        # closed waits for them (_await_failed_watches): so the supervision events of a lost
        # proc are queued before any caller wakes to its failed call, and a program that handles
        # that failure, then drains the supervision queue, sees every actor of the proc reported.
        self._failing_thread = threading.get_ident()
        self._identified.set()  # no answer will come: a call waiting for one (or made by a callback below) goes on
        try:
            self._fail_watches(reason)
        finally:
            self.lost = reason  # before the event: a send that failed meanwhile reads it
            self._watches_failed.set()
        self._fail_pending()

    def _fail_watches(self, reason: str) -> None:
        for call_id in list(self._watches):
            watch = self._pending.pop(call_id, None)
            if watch is not None:
                watch.set_raw((LOST, reason, self))

    def _await_failed_watches(self) -> None:
        """After a send on this peer's channel failed, wait (bounded) for the close handler to
        have failed the watches: a send can find the channel, or its protocol, closed before that
        handler ran. Only the first wait may time out (a close cut short by a Ctrl-C)."""
        if self._channel is not None and self._failing_thread != threading.get_ident():
            if not self._watches_failed.wait(WATCHES_FAILED_WAIT_SECONDS):
                self._watches_failed.set()

    def _fail_pending(self) -> None:
        """Fail every pending request as LOST, the watches first (as :meth:`_on_closed`)."""
        assert self.lost is not None
        self._fail_watches(self.lost)
        while self._pending:
            try:
                _, fut = self._pending.popitem()
            except KeyError:
                break
            fut.set_raw((LOST, self.lost, self))
        self._watches.clear()

    def loss_message(self, reason: str, detail_seconds: float = LOSS_DETAIL_SECONDS) -> str:
        """The message of a call failed by the lost link: the owner's story of the proc's end
        if it knows it by ``detail_seconds`` after the loss, else what it knows then;
        for a proc that is alive behind a broken link, that (:func:`.relinking.broken_link_text`)."""
        if self.relinked() is not None:
            return relinking.broken_link_text(self.display, reason)
        reason = reason.removeprefix(relinking.NOT_SENT)
        if self.explain_loss is not None:
            deadline = (self.lost_at or time.monotonic()) + detail_seconds
            try:
                return self.explain_loss(reason, deadline)
            except Exception:
                pass
        return reason

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close("closed by this client")

    # Broken links (relinking) ----------------------------------------------------------------

    def follow(self, listener: RelinkListener) -> None:
        """Tell ``listener`` (held weakly) when this peer's link is replaced."""
        with _listeners_lock:
            self.on_relinked.add(listener)

    def relinked(self) -> Peer | None:
        """The peer that reaches this one's proc again after its link broke (the proc is alive),
        waiting for the verdict (bounded); None when the proc is gone or the link was not broken."""
        verdict = self.verdict
        if verdict is None:
            return None
        successor: Peer | None = verdict.wait(self.lost_at or time.monotonic())
        return successor

    def _refuse_beyond(self, limit: int, fields: bytes, payload: Segments) -> None:
        """Raise MessageTooLarge for a request over the proc's limit: the proc would close the
        connection on it, failing every other call on the link, for a cause only its log told."""
        size = _REQUEST_FIXED + len(fields)
        for s in payload:
            size += s.nbytes if isinstance(s, memoryview) else len(s)
        if size > limit:
            raise wire_errors.MessageTooLarge(
                f"this call's message is {size:,} bytes; proc {self.display} accepts at most {limit:,} "
                f"(PROCMESH_MAX_MESSAGE_BYTES in its environment): send less per call, or raise the "
                f"limit where the procs start")

    def _limit_once_known(self, fields: bytes, payload: Segments) -> int | None:
        """The proc's limit for a call made on a connected link before IDENTIFY answered: a
        call that may be over it (over the least limit a proc may have) waits for the answer
        (bounded), except on the I/O thread, which reads it. Smaller calls go at once."""
        size = _REQUEST_FIXED + len(fields) + sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in payload)
        if size <= contract.MIN_MAX_MESSAGE_BYTES or reactor_mod.get_reactor().on_thread:
            return None
        self._identified.wait(IDENTIFY_WAIT_SECONDS)
        return self.max_message

    def _learn_identity(self) -> None:
        """Ask the proc who it is (IDENTIFY, once per connection): what a broken link compares,
        and the largest message it accepts."""
        def learnt(fut: futures.Future[Any]) -> None:
            try:
                raw = fut.peek_raw()
                if isinstance(raw, tuple) and raw[0] == OK and raw[1]:
                    try:
                        identity = json.loads(b"".join(bytes(s) for s in raw[1]))
                    except ValueError:
                        return
                    limit = identity.get("max_message_bytes") if isinstance(identity, dict) else None
                    if isinstance(limit, int) and limit > 0:
                        self.max_message = limit
                    self.identity = identity
            finally:
                self._identified.set()

        self.request((ops.IDENTIFY,), (), lambda raw: raw).add_done_callback(learnt)

    def _relink(self, verdict: relinking.Verdict, probe: channel_mod.Opener) -> None:
        """On a thread of its own: the same proc answers (asked through ``probe``)? Then a
        successor takes over."""
        alive, why = relinking.ask_again(self.address, self._token, self.identity, probe, self.meant)
        successor = None
        if alive:
            successor = Peer(self.address, self._token, self.display, self._opener, self.meant)
            successor.explain_loss = self.explain_loss
            with _listeners_lock:
                successor.on_relinked = weakref.WeakSet(self.on_relinked)
            # The same process answered: who it is is known already. Asked again over the new
            # link, a second break before the answer came would find the proc "not learnt" and
            # report a live proc dead.
            successor.identity = self.identity
            successor.max_message = self.max_message
            successor._identified.set()
            try:
                successor.connect()
            except Exception as exc:
                successor, why = None, f"it answered, then refused a new connection ({exc})"
        if successor is not None:
            with _peers_lock:
                if _peers.get(self._key()) is self:
                    _peers[self._key()] = successor
            with _listeners_lock:
                listeners = list(self.on_relinked)
            for listener in listeners:
                listener.peer_relinked(self, successor)
        verdict.settle(successor, why)


def _no_halt() -> None:
    """A relink ends by itself within its bounded probe."""


_peers: dict[tuple[Address, bytes, str | None], Peer] = {}
_peers_lock = threading.Lock()
_listeners_lock = threading.Lock()  # the peers' on_relinked sets: added to from any thread


def get_peer(address: Address, token: bytes, display: str | None = None, proc_id: str | None = None) -> Peer:
    """The shared peer for this address, token and proc meant (its incarnation id; None: any proc
    of the mesh). A lost peer stays lost (its actors are gone), unless its link broke under a live
    proc: then its successor takes its place here. Looked up per call (a port's send, a forwarded
    call): the proc meant is built, and its id checked, only with a new peer."""
    key = (address, token, proc_id)
    peer = _peers.get(key)
    if peer is None:
        with _peers_lock:
            peer = _peers.get(key)
            if peer is None:
                display = display or f"{address[0]}:{address[1]}"
                peer = Peer(address, token, display, meant=meaning(proc_id, display))
                _peers[key] = peer
    return peer


def forget_peer(peer: Peer) -> None:
    with _peers_lock:
        if _peers.get(peer._key()) is peer:
            del _peers[peer._key()]
