"""The ``*_async`` forms of blocking calls (``attach_async``, ``spawn_procs_async``, ...).

As Monarch pairs ``setup_torch_elastic_env`` with ``setup_torch_elastic_env_async``, each
blocking step of making a mesh has an ``async def`` twin that awaits :func:`run_blocking`: the
blocking form runs on a daemon thread of its own (never the loop's default executor, whose
shutdown would wait for it), so the event loop goes on serving other tasks. If the awaiting task
is cancelled (or Ctrl-C ends ``asyncio.run``), the thread is told so: waits that call
:func:`sleep` / :func:`check_cancelled` between polls (:mod:`mesh_client._src.kubernetes.attaching`)
raise ``CancelledError`` there, so the blocking form cleans up as for any error (a mesh it created
is deleted), and a result that still arrives is handed to ``discard`` (a mesh is stopped).

A call that returns a future, as ``ProcMesh.stop()`` does, has no ``async def`` twin: it does
its blocking work through :func:`off_the_loop`, on a thread of its own where the caller's thread
must not block, so ``await procs.stop()`` leaves the loop free and ``procs.stop()`` in a script
is done when it returns.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from mesh_client._src.runtime import exiting, interrupts, reactor

if TYPE_CHECKING:  # asyncio is imported where used: only async programs pay for it
    import asyncio

R = TypeVar("R")

#: How long a cancelled call's thread may take to clean up before the cancellation goes on (it
#: wakes at once from :func:`sleep`; only an API call in flight keeps it longer).
CANCEL_GRACE_SECONDS = 5.0

_state = threading.local()  # .cancel: the Event of the async call this thread runs, if any


async def run_blocking(fn: Callable[[], R], *, name: str, discard: Callable[[R], Any] | None = None,
                       at_exit: bool = False) -> R:
    """``fn()`` on a thread named ``name``, awaited; ``discard(result)`` if nobody awaits it any
    more. ``at_exit``: ``fn`` may be in an API call (TLS) when the program ends, so the exit tells
    its thread as a cancellation and waits for it (runtime/exiting.py)."""
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[R] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()  # the thread's work is over
    cancel = threading.Event()

    def settle(value: Any, error: BaseException | None) -> None:  # on the loop's thread
        if not ended.done():
            ended.set_result(None)
        if done.cancelled():
            if error is None:
                _discard(discard, value)
        elif error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        _state.cancel = cancel
        try:
            value: Any = fn()
            error: BaseException | None = None
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody will ever take the result
            if error is None:
                _discard(discard, value)

    thread = threading.Thread(target=work, name=name, daemon=True)
    if at_exit:  # a cancelled task's grace ran out, or nobody awaited it: it may still be in TLS
        exiting.track(thread, cancel.set)
    thread.start()
    try:
        return await done
    except asyncio.CancelledError:
        cancel.set()
        # Let the thread finish its cleanup (end the progress line, delete the mesh it made)
        # before the cancellation goes on: what it prints then comes before a Ctrl-C traceback.
        # Awaited, not joined: the loop's other tasks go on meanwhile.
        try:
            await asyncio.wait_for(asyncio.shield(ended), CANCEL_GRACE_SECONDS)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass  # it overran its grace, or we were cancelled again: go on cancelling
        raise


def off_the_loop(work: Callable[[], object], *, name: str) -> None:
    """``work()`` now, or on a daemon thread named ``name`` where this thread must not block: it
    runs an asyncio event loop (whose other tasks would wait for ``work``) or it is procmesh's
    I/O thread (a done callback: the replies ``work`` waits for come through it). ``work``
    reports its own outcome (it completes a future) and raises only an interrupt (a Ctrl-C,
    which comes to a caller it runs for inline). The program's exit waits for the thread
    (runtime/exiting.py): it may be deleting a mesh."""
    if not _must_not_block():
        work()
        return
    thread = threading.Thread(target=work, name=name, daemon=True)
    exiting.track(thread, _no_halt)
    thread.start()


def _must_not_block() -> bool:
    asyncio = sys.modules.get("asyncio")  # not imported: no loop runs anywhere
    in_loop = asyncio is not None and asyncio.events._get_running_loop() is not None
    return in_loop or reactor.on_reactor_thread()


def _no_halt() -> None:
    """What the exit tells a stop under way: nothing; it ends by itself (a proc is given 5 s)."""


def _discard(discard: Callable[[Any], Any] | None, value: Any) -> None:
    if discard is not None:
        try:
            discard(value)
        except Exception:
            pass  # best effort: the result was abandoned


def check_cancelled() -> None:
    """Raise ``CancelledError`` in a :func:`run_blocking` thread whose awaiting task went away."""
    cancel: threading.Event | None = getattr(_state, "cancel", None)
    if cancel is not None and cancel.is_set():
        import asyncio

        raise asyncio.CancelledError("the task awaiting this call was cancelled")


def sleep(seconds: float) -> None:
    """``time.sleep``, cut short (with ``CancelledError``) when the awaiting task is cancelled;
    a Ctrl-C that Python dropped since the last poll is raised here (:mod:`.interrupts`; one
    during the sleep itself is raised by ``time.sleep``)."""
    cancel: threading.Event | None = getattr(_state, "cancel", None)
    if cancel is None:
        interrupts.check()
        time.sleep(seconds)
        return
    cancel.wait(seconds)
    check_cancelled()
