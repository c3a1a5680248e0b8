"""An actor waiting for its own call: refused at the wait, instead of waiting for ever.

An actor handles one message at a time: its own thread takes the next message only once the
one it runs has returned (an ``async def`` endpoint runs on the actor's asyncio loop, and the
thread waits for it there, unless it is a ``@concurrent_endpoint``). A call an endpoint makes to
its own actor is queued behind the message that made it, so a wait for it that holds up that
message never ends (a timeout, if any, is all that ends it, and the caller of the outer call
waits as long). Monarch deadlocks there too; here such a wait raises at once, saying why and
what to do instead. Refused, because nothing else can end them:

- ``get()``, or iterating ``stream()`` up to the own call, on a thread where every wait holds up
  the actor's messages (:class:`.context.MessageThread`): the actor's own thread, and its
  loop's, where endpoints are all ``async def`` (an async endpoint runs on that loop);
- the same on the loop of an actor that mixes ``def`` and ``async def`` endpoints, while the
  task that made the call is one its thread waits for (the loop serves nothing meanwhile);
- ``await`` in the task that made the call, if the actor's thread waits for that task (a
  non-concurrent ``async def`` endpoint). An ``await`` elsewhere (a concurrent endpoint, a task
  of its own) lets the actor's thread go on to the call, so it is not refused.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from mesh_client._src.actor import context
from mesh_client._src.runtime.futures import Future

R = TypeVar("R")


def guard(futs: list[Future[Any]], here: context.MessageThread, actor_id: str, procs: Sequence[int],
          what: str) -> list[Future[Any]]:
    """``futs`` (one per proc of ``procs``, calls to actor ``actor_id``), with the one to the
    actor that runs on this thread (``here``: :func:`.context.messages_run_here`), if any,
    replaced by a future whose waits that never end raise."""
    if here.actor_id != actor_id or here.proc not in procs:
        return futs
    k = list(procs).index(here.proc)
    return [*futs[:k], _own_call(futs[k], here, what), *futs[k + 1:]]


def guard_one(fut: Future[R], here: context.MessageThread, actor_id: str, procs: Sequence[int], what: str) -> Future[R]:
    """``fut``, the outcome of a call to actor ``actor_id`` on all of ``procs``, guarded as
    :func:`guard` does when the actor running on this thread is among them."""
    return _own_call(fut, here, what) if here.actor_id == actor_id and here.proc in procs else fut


def _own_call(fut: Future[R], here: context.MessageThread, what: str) -> Future[R]:
    task = context.task_holding_messages()
    return OwnCall(fut, what, here.holds_messages, task) if here.holds_messages or task is not None else fut


def refuse_stream_wait(futs: Sequence[Future[Any]], left: int) -> None:
    """A ``stream()`` is about to wait for the next of ``futs`` to arrive, ``left`` of them not
    yielded yet and none queued: raise if all those are own calls pending that would never
    arrive while this thread waits. A future done but not yet queued (its done callbacks run
    after it is marked done, on the thread that completed it) still arrives: no refusal."""
    pending = [fut for fut in futs if not fut.done()]
    own = [fut for fut in pending if isinstance(fut, OwnCall)]
    if own and len(own) == len(pending) == left and all(fut.waits_for_ever_here() for fut in own):
        raise own[0].refusal()


class OwnCall(Future[R]):
    """The outcome of ``inner``, a call to the actor that made it; a wait for it that would
    hold up the message it is queued behind raises RuntimeError instead."""

    __slots__ = ("_inner", "_thread", "_what", "_holds_messages", "_task")

    def __init__(self, inner: Future[R], what: str, holds_messages: bool, task: Any) -> None:
        """``holds_messages``: any wait on this thread holds up the actor's messages; ``task``:
        the running task, which the actor's thread waits for (None if it does not)."""
        super().__init__(self._inner_outcome, inner._key)  # waits for it expect as for the call
        self._inner = inner
        self._thread = threading.get_ident()
        self._what = what
        self._holds_messages = holds_messages
        self._task = task
        inner.add_done_callback(self._arrived)

    def _arrived(self, _: Future[R]) -> None:
        self.set_raw(None)

    def _inner_outcome(self, _: object) -> R:
        return self._inner.get()

    def waits_for_ever_here(self) -> bool:
        """Whether a blocking wait for it on this thread, now, would never end."""
        return (not self._done and threading.get_ident() == self._thread
                and (self._holds_messages or self._task is not None and not self._task.done()))

    def refusal(self, awaited: bool = False) -> RuntimeError:
        """Why the wait was refused, and what to do instead (``awaited``: an ``await``, which a
        concurrent endpoint may make)."""
        return RuntimeError(
            f"{self._what} would wait for ever: it calls the actor that is waiting for it, and an "
            f"actor handles one message at a time, so the call runs only after this message returns. "
            f"Call the method directly (self.method(...)), or return without waiting for the call"
            + (", or make the waiting endpoint a @concurrent_endpoint (the actor then takes its next "
               "messages while it awaits)" if awaited else "")
        )

    def _wait(self, timeout: float | None) -> None:
        if self.waits_for_ever_here():
            raise self.refusal()
        super()._wait(timeout)

    def __await__(self) -> Generator[Any, None, R]:
        if not self._done and self._task is not None and context.task_holding_messages() is self._task:
            raise self.refusal(awaited=True)
        return (yield from super().__await__())
