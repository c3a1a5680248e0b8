"""Accepting connections and routing their messages to actors, on the reactor thread.

Nothing here blocks or runs user code: a CALL or SPAWN is queued for the actor's thread
(:mod:`.actors`), BOOTSTRAP runs on a worker thread, DESCRIBE and STOP are answered at once.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from mesh_client._src.actor import messages, ports
from mesh_client._src.runtime import peers, reactor, streams
from mesh_client._src.runtime.channel import Channel, ChannelState
from mesh_client._src.server import gpu
from mesh_client._src.server.actors import ENDED_KEPT, ActorRunner, reply
from mesh_client._src.wire import protocol, serialization

HANDSHAKE_TIMEOUT = 10.0


class ProcServer:
    """The listening socket and every connection of one proc server."""

    def __init__(
        self,
        listener: socket.socket,
        token: bytes,
        *,
        identity: dict[str, Any],
        on_stop: Callable[[], None],
        this_proc: Any = None,
        max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.listener = listener
        self.token = token
        self.identity = identity
        self.on_stop = on_stop
        self.this_proc = this_proc
        self.max_message_bytes = max_message_bytes
        self.actors: dict[str, ActorRunner] = {}
        # Actors that ended (stopped or failed) -> (report, failed), so late calls learn why.
        self.ended: collections.OrderedDict[str, tuple[str, bool]] = collections.OrderedDict()
        self.channels: set[Channel] = set()
        self.reactor = reactor.get_reactor()
        listener.setblocking(False)

    def __repr__(self) -> str:
        host, port = self.listener.getsockname()[:2]
        return f"<ProcServer {host}:{port}, {len(self.actors)} actors, {len(self.channels)} connections>"

    def start(self) -> None:
        self.reactor.register(self)

    def fileno(self) -> int:
        return self.listener.fileno()

    # Connections -----------------------------------------------------------------------------

    def on_readable(self) -> None:
        try:
            sock, peer = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(True)
        conn = protocol.Connection(protocol.Role.SERVER, self.token, max_message_bytes=self.max_message_bytes)
        channel = Channel(
            streams.SocketStream(sock),
            conn,
            on_message=self._on_message,
            on_closed=self._on_closed,
            label=f"{peer[0]}:{peer[1]}",
            reactor=self.reactor,
        )
        self.channels.add(channel)
        conn.start()
        channel._flush_handshake()
        channel.start()
        self.reactor.call_later(HANDSHAKE_TIMEOUT, lambda: self._expire(channel))

    def _expire(self, channel: Channel) -> None:
        if channel.state is ChannelState.HANDSHAKE:
            channel.close("no authentication within the handshake timeout")

    def _on_closed(self, channel: Channel, reason: str) -> None:
        self.channels.discard(channel)
        if "closed the connection" in reason:
            return  # a readiness probe, or a client that left
        if not channel.authenticated:
            print(f"procmesh: refused connection from {channel.label}: {reason}", file=sys.stderr)
        elif reason.startswith("protocol error"):
            print(f"procmesh: dropped connection from {channel.label}: {reason}", file=sys.stderr)

    # Messages --------------------------------------------------------------------------------

    def _on_message(self, channel: Channel, segments: list[Any]) -> None:
        header = pickle.loads(segments[0])
        call_id, op = header[0], header[1]
        if op == messages.CALL:
            runner = self.actors.get(header[2])
            if runner is not None:
                runner.submit((call_id, channel, header, segments[1:]))
            elif header[2] in self.ended:
                reply(channel, call_id, messages.DEAD, [self.ended[header[2]][0].encode()])
            else:
                self._fail(channel, call_id, LookupError(f"no actor {header[2]!r} in this proc; it was stopped or never spawned"))
        elif op == messages.WATCH:
            runner = self.actors.get(header[2])
            if runner is not None:
                runner.watch(channel, call_id)
            elif self.ended.get(header[2], ("", False))[1]:
                reply(channel, call_id, messages.DEAD, [self.ended[header[2]][0].encode()])
            else:
                reply(channel, call_id, peers.OK, [])
        elif op == messages.SPAWN:
            actor_id = header[2]
            runner = ActorRunner(actor_id, header[3], self._actor_exited, self.this_proc)
            self.actors[actor_id] = runner
            runner.submit((call_id, channel, header, segments[1:]))
        elif op == messages.STOP_ACTOR:
            runner = self.actors.get(header[2])
            if runner is None:
                reply(channel, call_id, peers.OK, [])
            else:
                runner.submit((call_id, channel, header, segments[1:]))
        elif op == messages.PORT_SEND:
            ports.deliver(header[2], header[3], segments[1:])
        elif op == messages.BOOTSTRAP:
            threading.Thread(target=self._bootstrap, args=(channel, call_id, segments[1:]), daemon=True).start()
        elif op == messages.DESCRIBE:
            description = dict(self.identity, pid=os.getpid(), gpu=gpu.visible_gpu(), actors=len(self.actors))
            reply(channel, call_id, peers.OK, [json.dumps(description).encode()])
        elif op == messages.STOP:
            reply(channel, call_id, peers.OK, [])
            self.on_stop()
        else:
            self._fail(channel, call_id, ValueError(f"unknown operation {op!r}; is the client a newer procmesh?"))

    def _fail(self, channel: Channel, call_id: int, exc: BaseException) -> None:
        reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))

    def _bootstrap(self, channel: Channel, call_id: int, segments: list[Any]) -> None:
        try:
            fn = serialization.loads(segments)
            result = fn()
            if hasattr(result, "__await__"):
                import asyncio

                result = asyncio.run(_awaited(result))
            reply(channel, call_id, peers.OK, serialization.dumps(result))
        except BaseException as exc:
            self._fail(channel, call_id, exc)

    def _actor_exited(self, runner: ActorRunner) -> None:
        if self.actors.get(runner.actor_id) is runner:
            del self.actors[runner.actor_id]
        if runner.end_report is not None:
            self.ended[runner.actor_id] = (runner.end_report, runner.failed)
            while len(self.ended) > ENDED_KEPT:
                self.ended.popitem(last=False)

    def cleanup_actors(self) -> None:
        """Run every actor's ``__cleanup__`` (on stop)."""
        for runner in list(self.actors.values()):
            if runner.end_report is None:
                runner.cleanup(None)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
