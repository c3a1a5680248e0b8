"""Ports and channels: ``Channel.open()``, ``Port.send``, ``PortReceiver.recv``, and the response
port of ``@endpoint(explicit_response_port=True)``.

A port opened here delivers into this process. Pickled into another proc, it becomes a reference
to the proc server of the opening process (``this_proc()``; in the controller that starts the
in-process one), and ``send`` there travels as a one-way PORT_SEND message that
:mod:`mesh_client._src.server.dispatch` hands to :func:`deliver`.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mesh_client._src.actor import messages
from mesh_client._src.actor.errors import ActorError
from mesh_client._src.runtime import futures, ops, peers
from mesh_client._src.wire import envelopes, serialization

R = TypeVar("R")

_ids = itertools.count(1)
# The owner's address and token: where a port's values travel once it was pickled elsewhere.
Home = tuple[tuple[str, int], bytes]

_local: dict[str, Callable[[bool, Any], None]] = {}  # port id -> deliver(ok, value or exception)
_local_lock = threading.Lock()


class Port(Generic[R]):
    """Where values go: ``port.send(value)``; ``port.exception(exc)`` sends an error instead."""

    def __init__(self, port_id: str, deliver: Callable[[bool, Any], None] | None = None, home: Home | None = None) -> None:
        self._port_id = port_id
        self._deliver = deliver  # set in the process that owns the port
        self._home = home  # (address, token) of the owning process's proc server, once pickled

    def send(self, value: R) -> None:
        self._put(True, value)

    def exception(self, exc: BaseException) -> None:
        self._put(False, exc)

    def _put(self, ok: bool, value: Any) -> None:
        deliver = self._deliver or _local.get(self._port_id)
        if deliver is not None:
            deliver(ok, value)
            return
        if self._home is None:
            raise RuntimeError(f"port {self._port_id} is closed: its receiver is gone")
        address, token = self._home
        peer = peers.get_peer((address[0], address[1]), token)
        payload = serialization.dumps(value) if ok else messages.encode_failure(value)
        peer.request((ops.PORT_SEND, self._port_id, ok), payload, lambda raw: None, reply=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Port, (self._port_id, None, self._home or _home_of_this_process()))

    def __repr__(self) -> str:
        return f"<Port {self._port_id}>"


class PortReceiver(Generic[R]):
    """The receiving end of a channel: ``recv()`` gives a Future of the next value."""

    def __init__(self, port_id: str, once: bool) -> None:
        self._port_id = port_id
        self._once = once
        self._values: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def _deliver(self, ok: bool, value: Any) -> None:
        self._values.put((ok, value))
        if self._once:
            close(self._port_id)

    def recv(self) -> futures.Future[R]:
        fut: futures.Future[R] = futures.Future()

        def wait() -> None:
            ok, value = self._values.get()
            value = _decoded(value)
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value if isinstance(value, ActorError) else ActorError(value, "A value sent to a port was an error."))

        try:
            ok, value = self._values.get_nowait()
        except queue.Empty:
            threading.Thread(target=wait, daemon=True, name=f"recv:{self._port_id}").start()
            return fut
        value = _decoded(value)
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value if isinstance(value, ActorError) else ActorError(value, "A value sent to a port was an error."))
        return fut


class Channel(Generic[R]):
    """``Channel.open()`` gives a connected ``(Port, PortReceiver)`` pair."""

    @staticmethod
    def open(once: bool = False) -> tuple[Port[R], PortReceiver[R]]:
        port_id = f"{os.getpid()}-{next(_ids)}"
        receiver: PortReceiver[R] = PortReceiver(port_id, once)
        with _local_lock:
            _local[port_id] = receiver._deliver
        return Port(port_id), receiver


def response_port(deliver: Callable[[bool, Any], None]) -> Port[Any]:
    """The port an ``explicit_response_port`` endpoint replies through (once, from anywhere)."""
    port_id = f"{os.getpid()}-reply-{next(_ids)}"

    def once(ok: bool, value: Any) -> None:
        close(port_id)
        deliver(ok, value)

    with _local_lock:
        _local[port_id] = once
    return Port(port_id, once)


class Encoded:
    """A value still in its wire segments (the reactor never unpickles); decoded by the receiver."""

    __slots__ = ("segments",)

    def __init__(self, segments: envelopes.Received) -> None:
        self.segments = segments


def deliver(port_id: str, ok: bool, segments: envelopes.Received) -> None:
    """A PORT_SEND arrived for a port of this process (dropped if its receiver is gone)."""
    target = _local.get(port_id)
    if target is not None:
        target(ok, Encoded(segments))


def _decoded(value: Any) -> Any:
    value = serialization.loads(value.segments) if isinstance(value, Encoded) else value
    return value.to_error("A value sent to a port was an error") if isinstance(value, messages.Failure) else value


def close(port_id: str) -> None:
    with _local_lock:
        _local.pop(port_id, None)


# How other procs reach this one: set by whoever knows this process's proc server.
home_provider: Callable[[], Home] | None = None


def _home_of_this_process() -> Home:
    if home_provider is None:
        raise RuntimeError("this process has no proc server to receive port messages; open the channel in an actor or a controller")
    return home_provider()
