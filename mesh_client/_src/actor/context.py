"""Who is running and which message it handles: ``context()``, ``current_rank()``, ``current_size()``.

The proc server (:mod:`mesh_client._src.server.actors`) sets the context of its actor thread
before each message; outside any actor the root client context applies.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from mesh_client._src.actor.shape import Extent, Point

if TYPE_CHECKING:
    from mesh_client._src.actor.proc_mesh import ProcMesh


class Lifecycle(Protocol):
    """What ends a running actor from inside it: its proc server's runner of it."""

    def stop_self(self, reason: str) -> None: ...
    def abort_self(self, reason: str) -> None: ...
    def run_next(self, fn: Callable[[], None]) -> None: ...

_EMPTY = Point(0, Extent((), ()))


@dataclasses.dataclass(frozen=True)
class Creator:
    """Who spawned an actor: its name (``"root"`` for the client) and its display chain."""

    name: str
    display: str

    def __str__(self) -> str:
        return self.display


@dataclasses.dataclass
class ActorInstance:
    """The running actor: its absolute ``rank`` in the mesh it was spawned on, and its names.

    ``str()`` is its display chain, ``<root>.<module.Class name{'gpus': 0/2}>``, as Monarch's.
    """

    name: str
    actor_id: str
    class_name: str
    rank: Point
    proc_mesh: ProcMesh | None = None  # the ProcMesh it was spawned on (None for the client)
    proc: ProcMesh | None = None  # this proc alone, as a one-point ProcMesh (None for the client)
    proc_id: str = ""
    display: str = "<root>"  # the owner chain, as supervision reports print it
    creator: Creator | None = None  # None for the client
    # The meshes this actor made and has not stopped (spawned actor meshes, procs), by what
    # names each (its actor id, its procs' run id), in the order made: stopped when it ends.
    children: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    lifecycle: Lifecycle | None = dataclasses.field(default=None, repr=False, compare=False)  # None for the client

    def __str__(self) -> str:
        return self.display

    def stop(self, reason: str | None = None) -> None:
        """Stop this actor once the messages queued before this one are handled, then the
        meshes it made (Monarch's ``Instance.stop``): a normal end, not a failure."""
        self._lifecycle("stop").stop_self(reason or "stopped itself")

    def abort(self, reason: str | None = None) -> None:
        """Fail this actor once the current message is handled: its owner gets a supervision
        event (``__supervise__``), later calls raise SupervisionError (Monarch's ``abort``)."""
        self._lifecycle("abort").abort_self(reason or "aborted itself")

    def kill(self, reason: str | None = None) -> None:
        """As :meth:`abort` (Monarch's ``kill`` also ends the actor with a failure)."""
        self._lifecycle("kill").abort_self(reason or "killed itself")

    def _lifecycle(self, what: str) -> Lifecycle:
        if self.lifecycle is None:
            raise RuntimeError(f"context().actor_instance.{what}() is for an actor: the client is not one; "
                               f"stop its meshes instead (mesh.stop())")
        return self.lifecycle


@dataclasses.dataclass
class Context:
    actor_instance: ActorInstance
    message_rank: Point


_CLIENT = Context(ActorInstance("root", "client", "Client", _EMPTY, proc_id=f"client:{os.getpid()}"), _EMPTY)
# A context variable, not a thread-local: each thread starts without one, and each asyncio task
# of a concurrent endpoint keeps its own message's context.
_current: contextvars.ContextVar[Context | None] = contextvars.ContextVar("procmesh_context", default=None)


def context() -> Context:
    """The current actor and message, or the root client context outside actors."""
    return _current.get() or _CLIENT


def current_rank() -> Point:
    """The position of this actor within the slice the current message was sent to."""
    return context().message_rank


def current_actor_name() -> str:
    """The id of the running actor, one per rank (``"client"`` outside actors)."""
    instance = context().actor_instance
    return instance.actor_id if instance.creator is None else f"{instance.actor_id}[{instance.rank.rank}]"


def current_size() -> dict[str, int]:
    """Sizes of the slice the current message was sent to."""
    return dict(context().message_rank.extent)


class MessageThread(NamedTuple):
    """A thread that runs an actor's messages (its own thread, or its asyncio loop's)."""

    actor_id: str
    proc: int  # the index of the actor's proc among its mesh's procs
    # Whether any wait on this thread holds up the actor's next message: always on its own
    # thread, and on its loop's unless the actor mixes def and async def endpoints (then its
    # own thread serves def ones while a concurrent endpoint waits on the loop).
    holds_messages: bool


# A call from such a thread to that same actor there, waited for where the wait holds up the
# actor's messages, could never run: it is queued behind the message that waits (:mod:`.own_calls`).
_message_threads: dict[int, MessageThread] = {}
# The tasks of actors' loops that their actor's own thread waits for (a non-concurrent async def
# endpoint, an async __cleanup__ it runs): a call to that actor made in such a task is queued
# behind it, so the task awaiting it would wait for ever.
_held_by_tasks: set[Any] = set()


def runs_messages(actor_id: str, proc: int, holds_messages: bool) -> None:
    """This thread runs the messages of ``actor_id`` on proc ``proc``, until :func:`ran_messages`."""
    _message_threads[threading.get_ident()] = MessageThread(actor_id, proc, holds_messages)


def ran_messages(ident: int) -> None:
    _message_threads.pop(ident, None)


def messages_run_here() -> MessageThread | None:
    """The actor (its id and proc) whose messages this thread runs, if any."""
    return _message_threads.get(threading.get_ident()) if _message_threads else None


def thread_waits_for(task: Any) -> None:
    """The actor's thread waits for ``task`` (the one running) until :func:`thread_waited_for`."""
    _held_by_tasks.add(task)


def thread_waited_for(task: Any) -> None:
    _held_by_tasks.discard(task)


def task_holding_messages() -> Any:
    """The running asyncio task, if its actor's thread waits for it; None otherwise."""
    if not _held_by_tasks:  # no actor of this process waits for a task of its loop
        return None
    import asyncio  # loaded already: such a task runs

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop runs on this thread
        return None
    return task if task in _held_by_tasks else None


def adopt(key: str, child: Any) -> None:
    """Keep ``child``, a mesh made by the running actor, with that actor (as Monarch keeps an
    actor's children alive): it is stopped when the actor ends, unless stopped before (the
    client's meshes end with the client instead)."""
    ctx = _current.get()
    if ctx is not None and ctx.actor_instance.lifecycle is not None:
        ctx.actor_instance.children[key] = child


def disown(key: str, size: int) -> None:
    """A mesh named ``key`` was stopped, ``size`` of its points: if that is all of the one the
    running actor made, it is no longer kept (an actor spawning and stopping meshes in a loop
    would keep every one, and what each was spawned with)."""
    ctx = _current.get()
    if ctx is None or ctx.actor_instance.lifecycle is None:
        return
    children = ctx.actor_instance.children
    child = children.get(key)
    if child is not None and len(child) <= size:
        del children[key]


def enter(ctx: Context | None) -> None:
    """Set this thread's context (used by the proc server around each message)."""
    _current.set(ctx)
