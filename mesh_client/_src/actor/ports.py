"""Ports and channels: ``Channel.open()``, ``Port.send``, ``PortReceiver.recv``, and the response
port of ``@endpoint(explicit_response_port=True)``.

A port opened here delivers into this process. Pickled into another proc, it becomes a reference
to the proc server of the opening process (``this_proc()``; in the controller that starts the
in-process one), and ``send`` there travels as a one-way PORT_SEND message that
:mod:`mesh_client._src.server.dispatch` hands to :func:`deliver`.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mesh_client._src.actor import messages
from mesh_client._src.runtime import futures, ops, peers
from mesh_client._src.wire import envelopes, serialization

R = TypeVar("R")

_ids = itertools.count(1)
# The owner's address, token and incarnation id: where a port's values travel once it was
# pickled elsewhere, and which proc there may take them (wire/binding.py; None: any of its mesh).
Home = tuple[tuple[str, int], bytes, str | None]

# port id -> deliver(ok, value or exception, rank: the sender's rank, for a RankedPortReceiver)
_local: dict[str, Callable[[bool, Any, int | None], None]] = {}
_local_lock = threading.Lock()


class Port(Generic[R]):
    """Where values go: ``port.send(value)``; ``port.exception(exc)`` sends an error instead,
    which the receiver raises as it is (as in Monarch: ``except ValueError:`` catches it)."""

    def __init__(self, port_id: str, deliver: Callable[[bool, Any, int | None], None] | None = None,
                 home: Home | None = None, rank: int | None = None) -> None:
        self._port_id = port_id
        self._deliver = deliver  # set in the process that owns the port
        self._home = home  # (address, token) of the owning process's proc server, once pickled
        self._rank = rank  # what a RankedPortReceiver pairs with the values sent here (None: nothing)
        self._return_undeliverable = True

    @property
    def return_undeliverable(self) -> bool:
        """Monarch's choice between returning a value that cannot be delivered to its sender
        (True, the default) and dropping it. Kept and read as Monarch's, per port object (a port
        sent elsewhere starts at True again); procmesh never returns a value to its sender: one
        whose receiver is gone is dropped either way (README)."""
        return self._return_undeliverable

    @return_undeliverable.setter
    def return_undeliverable(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"return_undeliverable is True or False; got {type(value).__name__}: {value!r}")
        self._return_undeliverable = value

    def send(self, value: R) -> None:
        self._put(True, value)

    def exception(self, exc: BaseException) -> None:
        if not isinstance(exc, BaseException):  # Monarch's receiver would fail to raise it, far from here
            raise TypeError(f"Port.exception takes an exception, e.g. ValueError('...'); got {type(exc).__name__}: {exc!r}")
        self._put(False, exc)

    def _ranked(self, rank: int) -> Port[R]:
        """This port, its values marked as coming from ``rank`` (``send(..., port=)`` answers so)."""
        return Port(self._port_id, self._deliver, self._home, rank)

    def _put(self, ok: bool, value: Any) -> None:
        deliver = self._deliver or _local.get(self._port_id)
        if deliver is not None:
            deliver(ok, value, self._rank)
            return
        if self._home is None:
            raise RuntimeError(f"port {self._port_id} is closed: its receiver is gone")
        address, token, proc_id = self._home
        peer = peers.get_peer((address[0], address[1]), token, None, proc_id)
        payload = serialization.dumps(value) if ok else messages.encode_failure(value, sent=True)
        peer.request((ops.PORT_SEND, self._port_id, ok, self._rank), payload, lambda raw: None, reply=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Port, (self._port_id, None, self._home or _home_of_this_process(), self._rank))

    def __repr__(self) -> str:
        return f"<Port {self._port_id}>"


Message = tuple[bool, Any, "int | None"]  # ok, the value (or exception) sent, the sender's rank


class _Inbox:
    """What a channel's receivers share: values not asked for yet, and ``recv()`` futures not
    answered yet, oldest first. No thread waits on it: a value is handed to the oldest waiting
    future (decoded by whoever reads it, never on the I/O thread). Registered weakly
    (:meth:`Channel.open`): once no receiver holds it, its port is closed."""

    __slots__ = ("lock", "values", "waiting", "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: collections.deque[Message] = collections.deque()
        self.waiting: collections.deque[futures.Future[Any]] = collections.deque()

    def put(self, message: Message) -> None:
        with self.lock:
            if not self.waiting:
                self.values.append(message)
                return
            fut = self.waiting.popleft()
        fut.set_raw(message)


class PortReceiver(Generic[R]):
    """The receiving end of a channel: ``recv()`` gives a Future of the next value."""

    def __init__(self, port_id: str, once: bool, inbox: _Inbox | None = None) -> None:
        self._port_id = port_id
        self._once = once
        self._claimed = False  # once: a recv() has asked for its one value
        self._inbox = _Inbox() if inbox is None else inbox

    def recv(self) -> futures.Future[R]:
        """The next value. A recv() given up on (its get timed out, its await was cancelled)
        still takes the value after those asked for before it, as in Monarch."""
        fut: futures.Future[R] = futures.Future(self._decode)
        if self._once:
            if self._claimed:  # its one value went to an earlier recv(): this one would wait for ever
                fut.set_exception(ValueError("OncePort is already used: a channel opened with once=True carries "
                                             "one value; open another channel for more"))
                return fut
            self._claimed = True
        inbox = self._inbox
        with inbox.lock:
            if not inbox.values:
                inbox.waiting.append(fut)
                return fut
            message = inbox.values.popleft()
        fut.set_raw(message)
        return fut

    def ranked(self) -> RankedPortReceiver[R]:
        """A receiver of the same values that gives each as ``(rank, value)`` (Monarch's)."""
        return RankedPortReceiver(self._port_id, self._once, self._inbox)

    def _decode(self, message: Message) -> R:
        return self._process(*message)

    def _process(self, ok: bool, value: Any, rank: int | None) -> R:
        result: R = _value(ok, value)
        return result


class RankedPortReceiver(PortReceiver[tuple[int, R]]):
    """``Channel.open_ranked()``: each value comes with the rank (in the mesh that was called)
    of the actor that produced it, as ``send(endpoint, args, kwargs, port=port)`` delivers."""

    def _process(self, ok: bool, value: Any, rank: int | None) -> tuple[int, R]:
        if rank is None:
            raise ValueError("RankedPort receiver got a message without a rank: only the results of "
                             "send(endpoint, args, kwargs, port=port) carry one, not what port.send() or "
                             "port.exception() sent")
        result: R = _value(ok, value)
        return rank, result


def _value(ok: bool, value: Any) -> Any:
    """The value of one message, or raise the exception sent, itself."""
    if isinstance(value, Encoded):  # sent from another process
        value = serialization.loads(value.segments)
    if ok:
        return value
    if isinstance(value, messages.Failure):
        value.raise_sent("A value sent to a port was an error")
    raise value


class Channel(Generic[R]):
    """``Channel.open()`` gives a connected ``(Port, PortReceiver)`` pair; ``open_ranked()`` a
    pair whose receiver gives ``(rank, value)``."""

    @staticmethod
    def open(once: bool = False) -> tuple[Port[R], PortReceiver[R]]:
        port_id = f"{os.getpid()}-{next(_ids)}"
        receiver: PortReceiver[R] = PortReceiver(port_id, once)
        inbox = weakref.ref(receiver._inbox)
        used = [False]

        def deliver(ok: bool, value: Any, rank: int | None) -> None:
            if once:
                if used[0]:
                    raise RuntimeError(f"port {port_id} is closed: a once port carries one value")
                used[0] = True
                close(port_id)
            found = inbox()
            if found is not None:  # else its receivers are gone, and the value with them
                found.put((ok, value, rank))

        with _local_lock:
            _local[port_id] = deliver
        # A dropped channel leaves nothing here. dict.pop, not close(): the collector may run
        # this while close() holds the lock.
        weakref.finalize(receiver._inbox, _local.pop, port_id, None)
        return Port(port_id, deliver), receiver

    @staticmethod
    def open_ranked(once: bool = False) -> tuple[Port[R], RankedPortReceiver[R]]:
        """``once`` is taken and not used, as by Monarch 0.7's: its port takes every result of a
        ``send`` to many actors, and a ported program may count on that."""
        port: Port[R]
        receiver: PortReceiver[R]
        port, receiver = Channel.open()
        return port, receiver.ranked()


def response_port(deliver: Callable[[bool, Any], None]) -> Port[Any]:
    """The port an ``explicit_response_port`` endpoint replies through (once, from anywhere)."""
    port_id = f"{os.getpid()}-reply-{next(_ids)}"

    def once(ok: bool, value: Any, rank: int | None) -> None:
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


def deliver(port_id: str, ok: bool, segments: envelopes.Received, rank: int | None = None) -> None:
    """A PORT_SEND arrived for a port of this process (dropped if its receiver is gone)."""
    target = _local.get(port_id)
    if target is not None:
        target(ok, Encoded(segments), rank)


def close(port_id: str) -> None:
    with _local_lock:
        _local.pop(port_id, None)


# How other procs reach this one: set by whoever knows this process's proc server.
home_provider: Callable[[], Home] | None = None


def _home_of_this_process() -> Home:
    if home_provider is None:
        raise RuntimeError("this process has no proc server to receive port messages; open the channel in an actor or a controller")
    return home_provider()
