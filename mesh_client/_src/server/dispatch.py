"""Admitting connections and routing their messages to actors, on the reactor thread.

Nothing here blocks or runs user code: a CALL or SPAWN is queued for the actor's thread
(:mod:`.actors`), BOOTSTRAP runs on a worker thread, IDENTIFY and STOP are answered at once.

Before a peer proves it holds the token it gets a budget, not a blank cheque: at most
``max_unauthenticated`` such connections at once (a newcomer closes the oldest), a small read
buffer (:mod:`mesh_client._src.runtime.channel`), a handshake deadline whose timer is cancelled
when the channel closes, and refusals that are logged at a rate limit (:mod:`.throttling`).
Sockets come from :mod:`.accepting`, which also survives descriptor exhaustion.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from mesh_client._src.actor import messages, ports, sources
from mesh_client._src.runtime import identifying, ops, peers, reactor, streams
from mesh_client._src.runtime.channel import STALL_SECONDS, Channel, ChannelState, CloseKind
from mesh_client._src.server import accepting, finalizing, forwarding, gpu, throttling
from mesh_client._src.server.actors import ENDED_KEPT, ActorRunner, reply
from mesh_client._src.wire import binding, envelopes, protocol, serialization

if TYPE_CHECKING:
    from mesh_client._src.actor.proc_mesh import ProcMesh

HANDSHAKE_TIMEOUT = 10.0
MAX_UNAUTHENTICATED = 256
# How long a shutting-down proc waits for its actors' calls in progress to end before their
# __cleanup__ runs anyway: within the 5 s after which a stopping proc is killed (the local
# launcher's, a pod's default grace period), leaving time for the cleanups and finalizers.
CLOSE_SECONDS = 3.0

# Looked up once: _on_message runs for every request.
_CALL = ops.CALL
_decode_request = envelopes.request_parts


class ProcServer:
    """The listening socket and every connection of one proc server."""

    def __init__(
        self,
        listener: socket.socket,
        token: bytes,
        *,
        identity: identifying.ProcIdentity,
        on_stop: Callable[[str | None], None],
        this_proc: ProcMesh | None = None,
        max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES,
        max_unauthenticated: int = MAX_UNAUTHENTICATED,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        log_period: float = 10.0,
        also_listening: Sequence[socket.socket] = (),
        incarnation: str | None = None,  # which run of this proc (contract.INCARNATION); None: drawn here
    ) -> None:
        if max_unauthenticated < 1:
            raise ValueError(f"max_unauthenticated={max_unauthenticated}: at least 1 connection must be able to authenticate")
        self.listener = listener
        self.token = token
        self.identity = identity
        self.boot = uuid.uuid4().hex  # this process's incarnation: IDENTIFY tells a live proc from a new one
        # Who this proc is in handshakes: clients that mean another proc are refused (wire/binding.py).
        coords = ",".join(f"{k}={v}" for k, v in (identity.get("coords") or {}).items()) or str(identity.get("rank", 0))
        self.proc_id = binding.ProcId(incarnation or uuid.uuid4().hex, f"{identity.get('mesh') or 'proc'}[{coords}]")
        self.on_stop = on_stop
        self.this_proc = this_proc
        self.max_message_bytes = max_message_bytes
        self.actors: dict[str, ActorRunner] = {}
        # Actors that ended (stopped or failed) -> (report, failed), so late calls learn why.
        self.ended: collections.OrderedDict[str, tuple[str, bool]] = collections.OrderedDict()
        # Set as the proc starts to shut down (close_actors): why, for calls that come after.
        self.closing: str | None = None
        self.channels: set[Channel] = set()
        self.forwarder: forwarding.Forwarder | None = None  # tree fan-out, started at the first FORWARD
        # Channels still in the handshake, each with the timer that closes it at its deadline.
        self.handshaking: dict[Channel, reactor.Timer] = {}
        self.max_unauthenticated = max_unauthenticated
        self.handshake_timeout = handshake_timeout
        self.reactor = reactor.get_reactor()
        self.refusals = throttling.RateLimitedLog("refused connections", self.reactor.call_later, period=log_period)
        self.drops = throttling.RateLimitedLog("dropped connections", self.reactor.call_later, period=log_period)
        self.accept_failures = throttling.RateLimitedLog("accept() failures", self.reactor.call_later, period=log_period)
        # The pod IP's listener first; others (the pod's own loopback) share its budgets.
        self.acceptors = [accepting.Acceptor(sock, self.reactor, self._admit, log=self.accept_failures)
                          for sock in (listener, *also_listening)]

    def __repr__(self) -> str:
        host, port = self.listener.getsockname()[:2]
        return (
            f"<ProcServer {host}:{port}, {len(self.actors)} actors, {len(self.channels)} connections"
            f" ({len(self.handshaking)} authenticating)>"
        )

    def start(self) -> None:
        for acceptor in self.acceptors:
            acceptor.start()

    def stop_listening(self) -> None:
        """Accept no more connections and free the ports, and return once they are free (a
        worker loop that returns to its program; a proc's listeners end with its process)."""
        def close_listeners() -> None:
            for acceptor in self.acceptors:
                self.reactor.unregister(acceptor)  # at once on the reactor's thread, before the close
                acceptor.listener.close()  # a paused acceptor's resume finds it closed and stays out
        self._on_reactor(close_listeners)

    def flush_logs(self) -> None:
        """Write what the rate-limited logs counted but have not written yet (any thread): the
        proc is stopping, and the refusals of its last period would otherwise never be told."""
        for log in (self.refusals, self.drops, self.accept_failures):
            log.flush()

    def close_connections(self, why: str) -> None:
        """Close every connection still open, and return once they are closed: a worker loop
        that returned to its program serves nothing more (its listeners are closed already)."""
        def close_all() -> None:
            for channel in list(self.channels):
                channel.close(why)
        self._on_reactor(close_all)

    def _on_reactor(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the reactor's thread, where sockets are registered and served, and wait
        until it ran."""
        if self.reactor.on_thread:
            fn()
            return
        ran = threading.Event()

        def run() -> None:
            try:
                fn()
            finally:
                ran.set()
        self.reactor.call_soon(run)
        ran.wait()

    # Connections -----------------------------------------------------------------------------

    def _admit(self, sock: socket.socket, peer: str) -> None:
        if len(self.handshaking) >= self.max_unauthenticated:
            # The oldest stranger makes room (its close is logged as a refusal): peers that hold
            # the whole budget idle cannot lock out a client that authenticates at once, which
            # only max_unauthenticated newer connections within its handshake could push out.
            oldest = next(iter(self.handshaking))
            oldest.close(f"evicted to admit a newer connection: {self.max_unauthenticated} connections"
                         " were already authenticating (PROCMESH_MAX_UNAUTHENTICATED)")
        sock.setblocking(True)
        stream = streams.SocketStream(sock)
        stream.stall_after(STALL_SECONDS)  # an actor's reply to a peer that stopped reading waits no longer
        channel = self.open_channel(stream, peer)
        if channel.state is not ChannelState.CLOSED:
            channel.start()

    def open_channel(self, stream: streams.Stream, display: str) -> Channel:
        """A server channel over ``stream`` with its HELLO sent and its handshake deadline set;
        :meth:`_admit` then hands it to the reactor (tests drive in-memory ones directly)."""
        conn = protocol.Connection(protocol.Role.SERVER, self.token, max_message_bytes=self.max_message_bytes,
                                   own=self.proc_id)
        channel = Channel(
            stream,
            conn,
            on_message=self._on_message,
            on_messages=self._on_messages,
            on_closed=self._on_closed,
            display=display,
            on_authenticated=self._authenticated,
            reactor=self.reactor,
        )
        self.channels.add(channel)
        # The timer's only reference to the channel goes when it is cancelled (on close).
        self.handshaking[channel] = self.reactor.call_later(self.handshake_timeout, lambda: self._expire(channel))
        conn.start()
        channel._flush_handshake()
        return channel

    def _expire(self, channel: Channel) -> None:
        if channel.state is ChannelState.HANDSHAKE:
            channel.close(f"no authentication within {self.handshake_timeout:g} s")

    def _authenticated(self, channel: Channel) -> None:
        timer = self.handshaking.pop(channel, None)
        if timer is not None:
            timer.cancel()

    def _on_closed(self, channel: Channel, reason: str) -> None:
        self.channels.discard(channel)
        timer = self.handshaking.pop(channel, None)
        if timer is not None:
            timer.cancel()
        kind = channel.close_kind
        if not channel.authenticated:
            if channel.bytes_received == 0 and kind in (CloseKind.PEER_LEFT, CloseKind.IO_ERROR):
                return  # a TCP connect and close (a readiness or liveness probe): not a refusal
            self.refusals.note(f"procmesh: refused connection from {channel.display}: {reason}")
        elif kind is CloseKind.PROTOCOL_ERROR:
            self.drops.note(f"procmesh: dropped connection from {channel.display}: {reason}")

    # Messages --------------------------------------------------------------------------------

    def _on_messages(self, channel: Channel, batch: list[envelopes.Received]) -> None:
        """The requests of one read, in order: a call to a live actor is queued right here (one
        loop, no call per message), anything else goes through :meth:`_handle`."""
        actors = self.actors
        op = 0
        try:
            for segments in batch:
                call_id, op, header, payload = _decode_request(segments)  # MalformedMessage closes the channel
                if op == _CALL:
                    runner = actors.get(header[2])
                    if runner is not None:
                        runner.put((call_id, channel, header, payload))
                        continue
                self._handle(channel, call_id, op, header, payload)
                if channel.state is ChannelState.CLOSED:  # a STOP, say: nothing more is read
                    return
        except (LookupError, TypeError) as exc:
            raise _malformed(op, exc) from None

    def _on_message(self, channel: Channel, segments: envelopes.Received) -> None:
        call_id, op, header, payload = _decode_request(segments)  # MalformedMessage closes the channel
        try:
            self._handle(channel, call_id, op, header, payload)
        except (LookupError, TypeError) as exc:
            raise _malformed(op, exc) from None

    def _handle(self, channel: Channel, call_id: int, op: int, header: tuple[Any, ...], payload: envelopes.Received) -> None:
        if op == _CALL:
            runner = self.actors.get(header[2])
            if runner is not None:
                runner.put((call_id, channel, header, payload))
            elif header[2] in self.ended:
                reply(channel, call_id, messages.DEAD, [self.ended[header[2]][0].encode()])
            elif self.closing is not None:
                reply(channel, call_id, messages.DEAD, [self.closing.encode()])
            else:
                self._fail(channel, call_id, LookupError(f"no actor {header[2]!r} in this proc; it was stopped or never spawned"))
        elif op == ops.FORWARD:
            if self.forwarder is None:
                self.forwarder = forwarding.Forwarder(self)
            self.forwarder.submit((channel, call_id, header, payload))
        elif op == ops.WATCH:
            runner = self.actors.get(header[2])
            if runner is not None:
                runner.watch(channel, call_id)
            elif header[2] in self.ended:  # failed: its report; stopped on purpose: OK
                report, failed = self.ended[header[2]]
                reply(channel, call_id, messages.DEAD if failed else peers.OK, [report.encode()] if failed else [])
            elif self.closing is not None:
                reply(channel, call_id, messages.DEAD, [self.closing.encode()])
            else:
                reply(channel, call_id, peers.OK, [])
        elif op == ops.SPAWN:
            actor_id, name = header[2], header[3]
            if type(actor_id) is not str or type(name) is not str:  # checked before a thread starts for it
                raise TypeError(f"a spawn names its actor with strings, got {type(actor_id).__name__} and {type(name).__name__}")
            if actor_id in self.actors:
                self._fail(channel, call_id, ValueError(f"actor {actor_id!r} already runs in this proc: spawn it under a new id"))
                return
            if self.closing is not None:  # its actors are stopped: a new one would never be
                reply(channel, call_id, messages.DEAD, [self.closing.encode()])
                return
            runner = ActorRunner(actor_id, name, self._actor_exited, self.this_proc)
            self.actors[actor_id] = runner
            runner.submit((call_id, channel, header, payload))
        elif op == ops.STOP_ACTOR:
            runner = self.actors.get(header[2])
            if runner is None:
                reply(channel, call_id, peers.OK, [])
            else:
                runner.submit((call_id, channel, header, payload))
        elif op == ops.PORT_SEND:
            ports.deliver(header[2], header[3], payload, header[4])
        elif op == ops.BOOTSTRAP:
            texts = header[2] if len(header) > 2 else {}  # the controller's files of the code pickled by value
            threading.Thread(target=self._bootstrap, args=(channel, call_id, payload, texts), daemon=True).start()
        elif op == ops.IDENTIFY:
            answer = identifying.IdentityReply(**self.identity, pid=os.getpid(), gpu=gpu.visible_gpu(),
                                               memory=gpu.memory(), actors=len(self.actors), boot=self.boot,
                                               incarnation=self.proc_id.incarnation,
                                               max_message_bytes=self.max_message_bytes)
            reply(channel, call_id, peers.OK, [json.dumps(answer).encode()])
        elif op == ops.STOP:
            reply(channel, call_id, peers.OK, [])
            reason = header[2] if len(header) > 2 else None  # ProcMesh.stop(reason); older clients send none
            self.on_stop(reason if isinstance(reason, str) else None)
        else:
            self._fail(channel, call_id, ValueError(f"unknown operation {op!r}; is the client a newer procmesh?"))

    def _fail(self, channel: Channel, call_id: int, exc: BaseException) -> None:
        reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))

    def _bootstrap(self, channel: Channel, call_id: int, segments: envelopes.Received, texts: dict[str, str]) -> None:
        try:
            sources.register(texts)
            fn = serialization.loads(segments)
            finalizing.shipped(fn)
            result = fn()
            if hasattr(result, "__await__"):
                import asyncio

                result = asyncio.run(_awaited(result))
            reply(channel, call_id, peers.OK, serialization.dumps(result))
        except BaseException as exc:
            self._fail(channel, call_id, exc)

    def _actor_exited(self, runner: ActorRunner) -> None:
        """On the actor's thread as it ends: forgotten on the reactor thread, where calls are
        queued to it, so a call queued as its thread stopped reading is answered, not lost."""
        self.reactor.call_soon(functools.partial(self._forget_actor, runner))

    def _forget_actor(self, runner: ActorRunner) -> None:
        if self.actors.get(runner.actor_id) is runner:
            del self.actors[runner.actor_id]
        if runner.end_report is not None:
            self.ended[runner.actor_id] = (runner.end_report, runner.failed)
            while len(self.ended) > ENDED_KEPT:
                self.ended.popitem(last=False)
        runner.answer_leftovers(runner.end_report or self.closing or
                                f"actor {runner.display} ended as its proc shut down")

    def _abandon(self, runner: ActorRunner, answered: threading.Event) -> None:
        """On the reactor thread: forget an actor whose proc ends under its call in progress (its
        queue answered), then let its thread end once that call returns."""
        self._forget_actor(runner)
        runner.submit(None)
        answered.set()

    def close_actors(self, why: str) -> None:
        """The proc shuts down (``why``: what ended it): every actor's ``__cleanup__`` runs, and
        from here a call or watch of an actor not ended before is answered DEAD with ``why``
        (a supervision failure in the caller), not "no actor in this proc" (a LookupError, as
        if the caller had named a wrong actor), while the proc's finalizers still run."""
        closing = self.closing = (f"the process this actor was running on is shutting down: {why}; its "
                                  f"actors were stopped")
        runners = list(self.actors.values())
        for runner in runners:
            if runner.end_report is None:
                runner.close(closing)  # after the message it handles now; the queued ones are answered
            else:
                runner.submit(None)  # its thread (and loop's) ends: a worker loop that returns leaks none
        deadline = time.monotonic() + CLOSE_SECONDS
        for runner in runners:
            if runner.end_report is None and not runner.join(max(0.0, deadline - time.monotonic())):
                # An endpoint still runs: clean up from here, beside it, so the proc can end
                # before it is killed (the endpoint ends with the process).
                print(f"procmesh: actor {runner.display} was still in a call {CLOSE_SECONDS:g} s after its "
                      f"proc began to shut down ({why}); its __cleanup__ runs now, beside it",
                      file=sys.stderr, flush=True)
                runner.abandoned = closing
                runner.cleanup(None)
                answered = threading.Event()  # the calls queued behind it hear why, before the proc ends
                self.reactor.call_soon(functools.partial(self._abandon, runner, answered))
                answered.wait(1.0)
        self.actors.clear()


def _malformed(op: int, exc: Exception) -> envelopes.MalformedMessage:
    """A request whose fields do not fit its op (too few, or of the wrong type): the channel
    closes with this error, instead of the reactor logging a traceback and leaving the caller
    waiting for a reply that never comes."""
    return envelopes.MalformedMessage(f"the fields of a request with op {op} do not fit it: {exc!r}")


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
