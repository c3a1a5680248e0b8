"""Supervision: failures of actors and procs travel to the owner of the mesh they belong to.

Every actor mesh is owned by the actor that spawned it (or by the client, at the root). When an
actor of the mesh fails (its ``__init__`` raised, a ``broadcast`` endpoint raised, its proc died,
or it did not handle a failure of its own children), the owner receives a :class:`MeshFailure`:
an actor owner in its ``__supervise__`` (on its own thread, registered here by the proc server's
:mod:`~mesh_client._src.server.actors`), the client in :func:`unhandled_fault_hook`, whose
default ends the controller as Monarch's does. :mod:`.proc_mesh` starts the watches that feed
:func:`report`.
"""

from __future__ import annotations

import _thread
import queue
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mesh_client._src.runtime import exiting

CLIENT = "client"  # the owner id of meshes spawned outside any actor


class MeshFailure:
    """What failed on a mesh: its name, the failed ranks, and a report a person can read."""

    def __init__(self, mesh_name: str, crashed_ranks: Sequence[int], report: str, mesh: object = None) -> None:
        self.mesh_name = mesh_name
        self.crashed_ranks = list(crashed_ranks)
        self._report = report
        self.mesh = mesh

    def report(self) -> str:
        """The failure as Monarch words it: ``The actor <...> and all its descendants have failed: ...``."""
        return self._report

    def __str__(self) -> str:
        event = self._report.replace(" and all its descendants have failed:", " failed:", 1)
        if event.startswith("The actor "):
            event = "Supervision event: actor " + event[len("The actor ") :]
        return f"MeshFailure(mesh_name={self.mesh_name}, crashed_ranks={self.crashed_ranks}, event={event})"

    __repr__ = __str__

    def __reduce__(self) -> tuple[Any, ...]:
        return (MeshFailure, (self.mesh_name, self.crashed_ranks, self._report))


def unhandled_fault_hook(failure: MeshFailure) -> None:
    """Called in the client for a failure no owner handled; the default ends the controller.

    Replace it to decide yourself (``mesh_client.actor.unhandled_fault_hook = my_hook``): a
    normal return drops the failure; raising (``sys.exit`` included) ends the controller, by a
    ``KeyboardInterrupt`` in its main thread, as in Monarch. That happens once: later
    unhandled failures are printed, and do not interrupt the program's cleanup again.
    """
    sys.exit(1)


_DEFAULT_HOOK = unhandled_fault_hook


def current_hook() -> Callable[[MeshFailure], Any]:
    """The hook the user installed on ``mesh_client.actor`` or ``mesh_client``, else the default."""
    for module_name in ("mesh_client.actor", "mesh_client"):
        hook: Callable[[MeshFailure], Any] | None = getattr(sys.modules.get(module_name), "unhandled_fault_hook", None)
        if hook is not None and hook is not _DEFAULT_HOOK:
            return hook
    return _DEFAULT_HOOK


# Owners in this process -------------------------------------------------------------------------

_owners: dict[str, Callable[[MeshFailure], None]] = {}
_owners_lock = threading.Lock()


def register_owner(actor_id: str, deliver: Callable[[MeshFailure], None]) -> None:
    """An actor in this process that may own meshes: ``deliver`` queues a failure to it."""
    with _owners_lock:
        _owners[actor_id] = deliver


def unregister_owner(actor_id: str) -> None:
    with _owners_lock:
        _owners.pop(actor_id, None)


def report(owner_id: str, failure: MeshFailure) -> None:
    """Hand a failure to its owner: an actor of this process, or the client's hook."""
    with _owners_lock:
        deliver = _owners.get(owner_id)
    if deliver is not None:
        deliver(failure)
    elif threading.main_thread().is_alive():  # not while the interpreter is exiting
        _call_hook(failure)


_ending = False  # the hook raised once: the main thread was told to end


def _call_hook(failure: MeshFailure) -> None:
    global _ending
    try:
        current_hook()(failure)
    except BaseException as exc:  # SystemExit from the default hook included
        if _ending:
            # One incident fails many actors at once (a proc, a node, a collective): interrupting
            # the main thread for each would cut short the cleanup of the first interrupt.
            print(f"procmesh: unhandled supervision event (the controller is already ending):\n{failure.report()}",
                  file=sys.stderr, flush=True)
            return
        _ending = True
        # The default hook's SystemExit is the ending itself; anything else is a bug in the
        # program's own hook, shown whole (its type alone told nothing of where).
        raised = "" if isinstance(exc, SystemExit) else (
            "the program's unhandled_fault_hook raised:\n" + "".join(traceback.format_exception(exc)).rstrip() + "\n")
        print(f"procmesh: unhandled supervision event, ending the controller (a KeyboardInterrupt in its main "
              f"thread):\n{raised}{failure.report()}", file=sys.stderr, flush=True)
        _interrupt_main()


#: How long the main thread may take to end after the KeyboardInterrupt of an unhandled event
#: when SIGINT is not Python's (ignored, as for a job started with ``&`` by a script).
IGNORED_SIGINT_GRACE_SECONDS = 5.0


def _interrupt_main() -> None:
    """A KeyboardInterrupt in the main thread, waking it even from a blocking call.

    Python handles SIGINT only where it was not ignored when the process started: a program
    run in the background by a non-interactive shell inherits SIGINT ignored, and the signal
    would be lost, leaving the controller running after an unhandled event. There the
    exception is set on the main thread directly (raised at its next bytecode, not inside a
    blocking call), and if the thread is still alive after a grace the process exits with
    status 1, as Monarch's default ends it."""
    main = threading.main_thread()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.pthread_kill(main.ident or 0, signal.SIGINT)
            return
        except (OSError, ValueError):
            _thread.interrupt_main()
            return
    import ctypes
    import os

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main.ident or 0),
                                               ctypes.py_object(KeyboardInterrupt))
    main.join(IGNORED_SIGINT_GRACE_SECONDS)
    if main.is_alive():
        print("procmesh: SIGINT is ignored in this process and the main thread is blocked: "
              "exiting with status 1", file=sys.stderr, flush=True)
        os._exit(1)


# One thread runs supervision work: never the reactor, never a user's thread.

_queue: queue.SimpleQueue[Callable[[], None]] | None = None
_queue_lock = threading.Lock()


def submit(work: Callable[[], None]) -> None:
    """Run ``work`` on the supervision thread (started on first use)."""
    global _queue
    if _queue is None:
        with _queue_lock:
            if _queue is None:
                works: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
                _queue = works
                thread = threading.Thread(target=_run, args=(works,), name="procmesh-supervision", daemon=True)

                def close() -> None:
                    _closing.set()
                    works.put(_nothing)  # wakes it

                # Explaining a lost proc may be in an API call (TLS) when the program exits.
                exiting.track(thread, close)
                thread.start()
    _queue.put(work)


_closing = threading.Event()  # the interpreter is exiting: what is left would be dropped by report()


def _nothing() -> None:
    pass


def _run(works: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        work = works.get()
        if _closing.is_set():
            return
        try:
            work()
        except Exception as exc:  # a bug of ours must not end supervision
            print(f"procmesh: supervision work failed: {exc!r}", file=sys.stderr, flush=True)


# Names, as Monarch prints them ------------------------------------------------------------------


def point_text(coords: Mapping[str, int], sizes: Mapping[str, int]) -> str:
    """``{'gpus': 1/2}``: each coordinate over its size."""
    return "{" + ", ".join(f"{k!r}: {v}/{sizes[k]}" for k, v in coords.items()) + "}"


def actor_display(creator: str, cls: type, name: str, coords: Mapping[str, int], sizes: Mapping[str, int]) -> str:
    """``<root>.<module.Class name{'gpus': 1/2}>``: the owner chain, then this actor."""
    return f"{creator}.<{cls.__module__}.{cls.__qualname__} {name}{point_text(coords, sizes)}>"


def failed_report(display: str, why: str) -> str:
    """Monarch's wording of an actor's failure, ``why`` indented under it."""
    body = "\n".join("  " + line if line else line for line in why.rstrip().splitlines())
    return f"The actor {display} and all its descendants have failed:\n{body}"
