"""Actors inside a proc: each on its own thread, one message at a time, in arrival order.

The reactor (via :mod:`.dispatch`) only queues work here; unpickling payloads, running user code
and pickling results happen on the actor's thread, so a slow actor never stalls I/O or others.
"""

from __future__ import annotations

import inspect
import queue
import sys
import threading
import traceback
from typing import Any

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor import messages
from mesh_client._src.actor.endpoint import is_endpoint
from mesh_client._src.actor.shape import Extent, Point
from mesh_client._src.runtime import peers
from mesh_client._src.runtime.channel import Channel, ChannelClosed
from mesh_client._src.wire import envelopes, serialization

Work = tuple[int, Channel, tuple[Any, ...], list[Any]]


def reply(channel: Channel, call_id: int, status: int, payload: list[Any]) -> None:
    """Send a reply; a caller that went away is not an error of ours."""
    if call_id == peers.NO_REPLY:
        if status != peers.OK:
            failure = serialization.loads(payload)
            print(f"procmesh: a broadcast failed (no caller to tell):\n{failure.traceback}", file=sys.stderr)
        return
    try:
        channel.send(envelopes.encode_reply(call_id, status, payload))
    except ChannelClosed:
        pass


class ActorRunner:
    """The thread of one actor: constructs it, then serves its queue until stopped."""

    def __init__(self, actor_id: str, name: str, on_exit: Any, this_proc: Any) -> None:
        self.actor_id = actor_id
        self.name = name
        self._queue: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._instance: Any = None
        self._context: ctx_mod.Context | None = None
        self._loop: Any = None  # an asyncio loop, made for the first async endpoint
        self._on_exit = on_exit
        self._this_proc = this_proc
        self._thread = threading.Thread(target=self._run, name=f"actor:{name}", daemon=True)
        self._thread.start()

    def submit(self, work: Work | None) -> None:
        self._queue.put(work)

    def _run(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                break
            call_id, channel, header, segments = work
            op = header[1]
            try:
                if op == messages.CALL:
                    result = self._call(header, segments)
                    reply(channel, call_id, peers.OK, serialization.dumps(result))
                elif op == messages.SPAWN:
                    self._construct(header, segments)
                    reply(channel, call_id, peers.OK, [])
                elif op == messages.STOP_ACTOR:
                    self.cleanup(None)
                    reply(channel, call_id, peers.OK, [])
                    break
            except BaseException as exc:
                reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))
                if op == messages.SPAWN:
                    break  # an actor whose __init__ failed does not exist
            finally:
                ctx_mod.enter(None)
        self._on_exit(self)

    def _construct(self, header: tuple[Any, ...], segments: list[Any]) -> None:
        _, _, actor_id, name, index, labels, sizes = header
        cls, args, kwargs, proc_mesh = serialization.loads(segments)
        rank = Point(index, Extent(labels, sizes))
        instance = ctx_mod.ActorInstance(
            name=name,
            actor_id=actor_id,
            class_name=cls.__qualname__,
            rank=rank,
            proc_mesh=proc_mesh,
            proc=self._this_proc,
            proc_id=str(self._this_proc),
        )
        self._context = ctx_mod.Context(instance, rank)
        ctx_mod.enter(self._context)
        self._instance = cls(*args, **kwargs)

    def _call(self, header: tuple[Any, ...], segments: list[Any]) -> Any:
        _, _, _, method, index, labels, sizes = header
        args, kwargs = serialization.loads(segments)
        assert self._context is not None
        ctx_mod.enter(ctx_mod.Context(self._context.actor_instance, Point(index, Extent(labels, sizes))))
        fn = getattr(type(self._instance), method, None)
        if fn is None or not is_endpoint(fn):
            raise AttributeError(f"{type(self._instance).__qualname__}.{method} is not an endpoint")
        result = fn(self._instance, *args, **kwargs)
        if inspect.isawaitable(result):
            if self._loop is None:
                import asyncio

                self._loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self._loop)
            result = self._loop.run_until_complete(result)
        return result

    def cleanup(self, exc: BaseException | None) -> None:
        hook = getattr(self._instance, "__cleanup__", None)
        if hook is None:
            return
        try:
            result = hook(exc)
            if inspect.isawaitable(result):
                import asyncio

                loop = self._loop or asyncio.new_event_loop()
                loop.run_until_complete(result)
        except Exception:
            print(f"procmesh: __cleanup__ of actor {self.name!r} raised:", file=sys.stderr)
            traceback.print_exc()
