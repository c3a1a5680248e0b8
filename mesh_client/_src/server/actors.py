"""Actors inside a proc: each on its own thread, one message at a time, in arrival order.

The reactor (via :mod:`.dispatch`) only queues work here; unpickling payloads, running user code
and pickling results happen on the actor's thread, so a slow actor never stalls I/O or others.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor import messages, ports, sources, supervision
from mesh_client._src.actor.endpoint import (
    CONCURRENT,
    EXPLICIT_PORT,
    UNTRACED,
    endpoint_kinds,
    endpoint_names,
    is_endpoint,
)
from mesh_client._src.actor.shape import Extent, Point
from mesh_client._src.runtime import ahead, ops, peers, waits
from mesh_client._src.runtime.channel import Channel, ChannelClosed
from mesh_client._src.server import finalizing, logs, tracing
from mesh_client._src.wire import envelopes, packing, serialization

if TYPE_CHECKING:  # asyncio is imported where used: it costs ~35 ms at a proc's start
    import asyncio
    import concurrent.futures

    from mesh_client._src.actor.actor import Actor
    from mesh_client._src.actor.proc_mesh import ProcMesh

# (call id, the caller's channel (None: made in this process), request header, payload)
Work = tuple[int, Channel | None, tuple[Any, ...], envelopes.Received]


def reply(channel: Channel | None, call_id: int, status: int, payload: Sequence[envelopes.Segment], hold: bool = False) -> None:
    """Send a reply; a caller that went away is not an error of ours. ``hold``: more replies
    are coming, it may wait to go out with them (see :meth:`ActorRunner._run`)."""
    if call_id == peers.NO_REPLY or channel is None:
        return
    try:
        if type(channel) is Channel:  # the frame packed in one piece (wire/packing.py)
            channel.send_frame(_reply_frame(call_id, status, payload), hold)
        else:  # what stands in for a channel (a tree's collector, forwarding.py) takes segments, no hold
            channel.send(envelopes.encode_reply(call_id, status, payload))
    except ChannelClosed:
        pass


# Looked up once: these run for every call.
_reply_frame = packing.reply_frame
_CALL, _STOP_ACTOR, _OK, _NO_REPLY = ops.CALL, ops.STOP_ACTOR, peers.OK, peers.NO_REPLY
_NO_ARGUMENTS = serialization.NO_ARGUMENTS
_enter = ctx_mod.enter


SUPERVISE = -1  # a work item made in this process: a failure of a mesh this actor owns
FAILED_TASK = -2  # a work item made in this process: a concurrent endpoint with no caller raised
ABORT = -3  # a work item made in this process: the actor aborts itself (context().actor_instance.abort)
UNHANDLED = -4  # a work item made in this process: its loop's __supervise__ did not handle a failure
RUN_NEXT = -5  # a work item made in this process: a function the actor asked to run once its reply is out
CLOSE = -6  # a work item made in this process: the proc shuts down; clean up after the message handled now
_NO_REPLY_YET = object()  # _call's result when the reply is sent later (a port or a task)

# (function, explicit port, untraced, concurrent, async def): what _call needs of an endpoint.
_Plan = tuple[Callable[..., Any], bool, bool, bool, bool]
# Message contexts an actor keeps (one per slice and point it is called through).
CONTEXTS_KEPT = 64

# An endpoint whose last run took less than this is quick: replies held while more work is
# queued may wait through it (a slower one, or one never run, gets them written before it starts).
QUICK_SECONDS = 0.0002

# How many ended actors a proc remembers, so that late calls say why their actor is gone.
ENDED_KEPT = 4096
CHILD_STOP_SECONDS = 60.0  # for each mesh an ending actor made to stop (its actors' __cleanup__ included)
CANCEL_TIMEOUT = 5.0  # seconds for cancelled concurrent endpoints to finish when the actor stops


class ActorRunner:
    """The thread of one actor: constructs it, then serves its queue until stopped.

    An actor fails when its ``__init__`` raises, when a ``broadcast`` endpoint (no caller to
    tell) raises, when an endpoint raises a BaseException that is not an Exception, or when it
    does not handle a failure of a mesh it owns (``__supervise__``). A failed actor's thread (and
    its loop's) ends; its proc answers every later call with its report (DEAD), and its watchers
    (the owner's supervision) get it too.
    """

    def __init__(self, actor_id: str, name: str, on_exit: Callable[[ActorRunner], None], this_proc: ProcMesh | None) -> None:
        self.actor_id = actor_id
        self.name = name
        self.display = f"<{name}>"
        self.end_report: str | None = None  # why calls to this actor can no longer be served
        self.failed = False
        self._watchers: list[tuple[Channel, int]] = []
        self._watch_lock = threading.Lock()
        self._queue: waits.Mailbox[Work | None] = waits.Mailbox()  # its wait spins first (waits.py)
        self.put = self._queue.put  # submit() without its frame: the reactor queues every call through it
        self._instance: Actor | None = None
        self._context: ctx_mod.Context | None = None
        self._plans: dict[str, _Plan] = {}  # endpoint name -> how to call it (see _plan)
        self._quick: set[str] = set()  # endpoints whose last run was quick (QUICK_SECONDS)
        self._contexts: dict[tuple[int, tuple[str, ...], tuple[int, ...]], ctx_mod.Context] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the actor's asyncio loop, on a thread of its own, made for the first async endpoint
        self._on_exit = on_exit
        self._this_proc = this_proc
        self._home: tuple[str, int] | None = None  # this actor's id and proc index, once constructed
        self._mixed = False  # its endpoints mix def and async def: a wait on its loop may not hold up its messages
        self._on_loop = False  # its endpoints all async def: __supervise__ runs on its loop (_deliver)
        self._cleaning = False  # cleanup() began (it runs once), under _watch_lock
        # Why its proc ends under a call it is still running (dispatch.close_actors).
        self.abandoned: str | None = None
        self._closing: str | None = None  # why its proc shuts down, once it does (close)
        self._held: concurrent.futures.Future[Any] | None = None  # the async endpoint awaited now
        self._bell = waits.make_bell()  # rung as it ends (_wait_for)
        self._cleaned = threading.Event()  # and ended
        self._supervising: asyncio.Lock | None = None  # made on the loop: one __supervise__ at a time there
        self._thread = threading.Thread(target=self._run, name=f"actor:{name}", daemon=True)
        self._thread.start()

    def submit(self, work: Work | None) -> None:
        self._queue.put(work)

    def watch(self, channel: Channel, call_id: int) -> None:
        """Answer ``call_id`` when this actor ends (at once if it already has)."""
        with self._watch_lock:
            if self.end_report is None:
                self._watchers.append((channel, call_id))
                return
        self._answer_watcher(channel, call_id)

    def _answer_watcher(self, channel: Channel, call_id: int) -> None:
        if self.failed and self.end_report is not None:
            reply(channel, call_id, messages.DEAD, [self.end_report.encode()])
        else:
            reply(channel, call_id, peers.OK, [])

    def _end(self, report: str, failed: bool) -> None:
        with self._watch_lock:
            if self.end_report is not None:
                return
            self.end_report = report
            self.failed = failed
            watchers, self._watchers = self._watchers, []
        supervision.unregister_owner(self.actor_id)
        for channel, call_id in watchers:
            self._answer_watcher(channel, call_id)

    def stop_self(self, reason: str) -> None:
        """The actor asked to stop: after the messages queued before this, as a client's stop."""
        self._queue.put((peers.NO_REPLY, None, (peers.NO_REPLY, _STOP_ACTOR, self.actor_id, reason), []))

    def abort_self(self, reason: str) -> None:
        """The actor asked to fail: next, before the messages queued already."""
        self._queue.put_first((peers.NO_REPLY, None, (peers.NO_REPLY, ABORT, reason), []))

    def close(self, why: str) -> None:
        """The proc shuts down (``why``): once the message it handles now is done (a def
        endpoint is not cut short; an async one awaiting is cancelled, as Monarch's), the
        actor's ``__cleanup__`` runs on its own thread and the thread ends; what was queued
        behind is answered as gone (dispatch's ``answer_leftovers``), never run after
        ``__cleanup__``, nor beside it (an actor handles one message at a time)."""
        self._closing = why
        self._queue.put_first((peers.NO_REPLY, None, (peers.NO_REPLY, CLOSE), []))
        held = self._held
        if held is not None:
            held.cancel()

    def _run_queued_next(self) -> None:
        """At CLOSE, a stop, or the actor's failure: what it asked to run once its last reply was
        out (run_next, an SPMD script's process-group teardown and the proc's release for the
        next job) still runs; the rest stays for the leftovers."""
        rest = []
        for work in self._queue.drain():
            if work is not None and work[2][1] == RUN_NEXT:
                try:
                    work[2][2]()
                except Exception:  # noqa: BLE001 - reported; the cleanup must still run
                    traceback.print_exc()
            else:
                rest.append(work)
        for work in rest:
            self._queue.put(work)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the actor's thread to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def run_next(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on this actor's thread once the message it handles now is done and its reply
        written, before the messages queued already (what must not delay or overtake the reply,
        e.g. ending an SPMD script's process group: spmd/process_groups.py). ``fn`` must not
        raise: an exception fails the actor, as one of a call without a caller does."""
        self._queue.put_first((peers.NO_REPLY, None, (peers.NO_REPLY, RUN_NEXT, fn), []))

    def answer_leftovers(self, why: str) -> None:
        """Answer what was queued after this actor's thread stopped reading (a call that came
        in as it stopped): ``why`` it is gone, as to a later call, so no caller waits for ever.
        Called on the reactor thread once no more can be queued (dispatch removed this runner)."""
        for work in self._queue.drain():
            if work is None:
                continue
            call_id, channel, header, _ = work
            if header[1] == _CALL:
                reply(channel, call_id, messages.DEAD, [why.encode()])
            elif header[1] == _STOP_ACTOR:
                reply(channel, call_id, peers.OK, [])

    def _fail(self, report: str, exc: BaseException | None) -> None:
        print(f"procmesh: actor failed: {report}", file=sys.stderr, flush=True)
        self._end(report, failed=True)
        self.cleanup(exc)

    def _run(self) -> None:
        try:
            self._serve()
        finally:  # also when something escaped (a SystemExit from __cleanup__): nothing is left registered
            self._exit()

    def _serve(self) -> None:
        """Serve the queue. While more work is queued, a call's reply is held (coalescing) to
        go out with the next ones, in one write: they are all written when the queue runs dry,
        before an endpoint that is not known to be quick, and at the latest by the reactor's
        timer, ``coalescing.HOLD_SECONDS`` after the batch began (it runs as soon as this
        thread blocks or yields the GIL), so a held reply never waits for a slow or blocking
        endpoint."""
        work_queue = self._queue
        held: set[Channel] = set()  # channels this thread may have left replies held on
        clock = time.perf_counter
        quick = self._quick
        spin = 0  # how long the next wait for work spins whatever the pace (ns): work is due (ahead.py)
        while True:
            if held and work_queue.empty():
                _flush(held)
            work = work_queue.get(spin)
            spin = 0
            if work is None:
                break
            call_id, channel, header, segments = work
            op = header[1]
            if held and not (op == _CALL and header[3] in quick):
                _flush(held)
            if op == _STOP_ACTOR:
                self._run_queued_next()
                if not self.failed:
                    self.cleanup(None)
                reason = header[3] if len(header) > 3 else "stopped by client"
                self._end(f"Supervision event: actor {self.display} has status: stopped ({reason})", failed=False)
                reply(channel, call_id, peers.OK, [])
                break
            if op == CLOSE:  # not _end: the proc's end is no normal stop to the actor's watchers
                self._run_queued_next()
                if not self.failed:
                    self.cleanup(None)
                break
            try:
                if op == _CALL:
                    started = clock()
                    result = self._call(call_id, channel, header, segments, started)
                    took = clock() - started
                    if took < QUICK_SECONDS:
                        quick.add(header[3])
                    else:
                        quick.discard(header[3])
                    if result is not _NO_REPLY_YET and call_id != _NO_REPLY:  # a broadcast's result is not sent
                        # Held while more work is queued; written when the queue runs dry or before
                        # anything that may block (the top of this loop). A stand-in channel takes no hold.
                        hold = type(channel) is Channel and not work_queue.empty()
                        try:
                            payload = serialization.dumps(result)
                        except Exception as exc:
                            raise _unsendable(header[3], result, exc) from None
                        reply(channel, call_id, _OK, payload, hold)
                        if hold:
                            held.add(channel)  # type: ignore[arg-type]  # hold: it is a Channel
                        elif took >= QUICK_SECONDS:  # a long one: a loop's next call follows its reply closely
                            spin = ahead.after_long_work(took)
                elif op == ops.SPAWN:
                    self._construct(header, segments)
                    reply(channel, call_id, peers.OK, [])
                elif op == SUPERVISE:
                    self._supervise(header[2])
                elif op == FAILED_TASK:
                    raise header[2]
                elif op == UNHANDLED:
                    raise _Unhandled()
                elif op == RUN_NEXT:
                    header[2]()
                elif op == ABORT:
                    reason = header[2]
                    self._fail(supervision.failed_report(self.display, f"actor explicitly aborted due to: {reason}"),
                               RuntimeError(f"the actor aborted itself: {reason}"))
            except BaseException as exc:
                try:
                    self._failed_on(op, call_id, channel, header, exc)
                except Exception:  # a bug in reporting it: this thread must live on for the calls after it
                    with contextlib.suppress(Exception):
                        traceback.print_exc()
            finally:
                _enter(None)
            if self.failed:  # its proc answers the calls that come after with its report (dispatch)
                self._run_queued_next()  # what the failed call queued to run after it (an SPMD job's end)
                break
        _flush(held)

    def _exit(self) -> None:
        """The actor's thread ends: so does its loop's (its tasks were cancelled by cleanup)."""
        ctx_mod.ran_messages(threading.get_ident())
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)  # the loop's thread leaves the registry itself
        self._on_exit(self)

    def _failed_on(self, op: int, call_id: int, channel: Channel | None, header: tuple[Any, ...], exc: BaseException) -> None:
        if self.abandoned is not None:
            # Its proc ends under this call (its modules finalized, what it raised says nothing):
            # no reply; its caller hears of the proc's end, with the reason the stop gave.
            return
        futures_mod = sys.modules.get("concurrent.futures")  # loaded where a loop ran the endpoint
        if op == ops.CALL and (self._cleaning or self._closing is not None) and futures_mod is not None \
                and isinstance(exc, futures_mod.CancelledError):
            # Its async endpoint was cancelled as the proc shut down or the actor cleaned up: the
            # actor ended under the call, which its caller hears as such, not as its error.
            why = self._closing or self.end_report or f"actor {self.display} ended while the call ran, which was cancelled"
            reply(channel, call_id, messages.DEAD, [why.encode()])
            return
        if isinstance(exc, _Fatal):
            exc = exc.exception
        elif op == ops.CALL and call_id != peers.NO_REPLY and isinstance(exc, Exception):
            reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))  # the caller handles it
            return
        if op in (SUPERVISE, UNHANDLED) and isinstance(exc, _Unhandled):
            report = header[2].report()  # Monarch passes the child's report up unchanged
        else:
            report = supervision.failed_report(self.display, _aborted(exc))
        if op == ops.SPAWN:
            reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))
        elif op in (ops.CALL, FAILED_TASK):
            reply(channel, call_id, messages.DEAD, [report.encode()])
        self._fail(report, exc)

    def _construct(self, header: tuple[Any, ...], segments: envelopes.Received) -> None:
        _, _, actor_id, name, index, labels, sizes = header[:7]
        if len(header) > 7:  # the controller's files of the code pickled by value
            sources.register(header[7])
        cls, args, kwargs, proc_mesh, creator = serialization.loads(segments)
        finalizing.shipped(cls)  # its script's globals are finalized when the proc ends
        rank = Point(index, Extent(labels, sizes))
        self.display = supervision.actor_display(creator.display, cls, name, dict(rank), dict(zip(labels, sizes)))
        logs.prefix_with_actor()
        instance = ctx_mod.ActorInstance(
            name=name,
            actor_id=actor_id,
            class_name=cls.__qualname__,
            rank=rank,
            proc_mesh=proc_mesh,
            proc=self._this_proc,
            proc_id=str(self._this_proc),
            display=self.display,
            creator=creator,
            lifecycle=self,
        )
        self._context = ctx_mod.Context(instance, rank)
        ctx_mod.enter(self._context)
        kinds = set(endpoint_kinds(cls, endpoint_names(cls)).values())
        self._on_loop = kinds == {True}  # every endpoint an async def: its failures are handled on its loop
        if proc_mesh is not None:
            # A wait on its thread for its own call can never end (own_calls.py), nor one on
            # its loop's unless it mixes def and async def endpoints (options.mixed_endpoints):
            # then its thread may serve a def one while a concurrent endpoint waits on the loop.
            self._home = (actor_id, proc_mesh._shape.ranks[index])  # numbered as in all handles of its group
            self._mixed = len(kinds) > 1
            ctx_mod.runs_messages(*self._home, holds_messages=True)
        supervision.register_owner(actor_id, self._deliver)
        self._instance = cls(*args, **kwargs)

    def _deliver(self, failure: supervision.MeshFailure) -> None:
        """A mesh this actor owns failed. An actor of ``async def`` endpoints handles it on its
        loop, beside the endpoint running there (which may be waiting for it), as Monarch runs
        ``__supervise__`` beside its endpoints; others on their thread, between messages."""
        loop = self._loop
        if loop is not None and self._on_loop:
            import asyncio

            coroutine = self._supervise_on_loop(failure)
            try:
                asyncio.run_coroutine_threadsafe(coroutine, loop)
                return
            except RuntimeError:  # the loop closed: the actor has ended, as the mailbox will say
                coroutine.close()
        self.submit((peers.NO_REPLY, None, (peers.NO_REPLY, SUPERVISE, failure), []))

    async def _supervise_on_loop(self, failure: supervision.MeshFailure) -> None:
        """``__supervise__`` on the actor's loop, one failure at a time; a failure it does not
        handle (or its error) fails the actor on its thread, next."""
        import asyncio

        if self._supervising is None:
            self._supervising = asyncio.Lock()
        async with self._supervising:
            if self.end_report is not None:
                return
            assert self._context is not None
            ctx_mod.enter(self._context)
            hook = getattr(type(self._instance), "__supervise__", None)
            try:
                handled = hook(self._instance, failure) if hook is not None else False
                if inspect.isawaitable(handled):
                    handled = await handled
            except Exception as exc:
                self._queue.put_first((peers.NO_REPLY, None, (peers.NO_REPLY, FAILED_TASK, exc), []))
                return
            if not handled:
                self._queue.put_first((peers.NO_REPLY, None, (peers.NO_REPLY, UNHANDLED, failure), []))

    def _supervise(self, failure: supervision.MeshFailure) -> None:
        assert self._context is not None
        ctx_mod.enter(self._context)
        hook = getattr(type(self._instance), "__supervise__", None)
        handled = hook(self._instance, failure) if hook is not None else False
        if inspect.isawaitable(handled):
            handled = self._run_async(handled)
        if not handled:
            raise _Unhandled()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            import asyncio

            self._loop = loop = asyncio.new_event_loop()
            home, holds_messages = self._home, not self._mixed

            def serve() -> None:
                if home is not None:
                    ctx_mod.runs_messages(*home, holds_messages=holds_messages)
                try:
                    loop.run_forever()  # until the actor's thread ends
                finally:
                    ctx_mod.ran_messages(threading.get_ident())
                    loop.close()

            threading.Thread(target=serve, name=f"actor-loop:{self.name}", daemon=True).start()
        return self._loop

    def _schedule(self, awaitable: Awaitable[Any], traced: str | None = None,
                  held: bool = False) -> concurrent.futures.Future[Any]:
        """Run ``awaitable`` as a task of the actor's loop, in this message's context, inside a
        tracing span named ``traced`` if given (and the proc has a tracer). ``held``: the
        actor's thread waits for it (its messages are held up meanwhile: own_calls.py)."""
        ctx = ctx_mod.context()
        tracer = None if traced is None else tracing.tracer()
        import asyncio

        async def in_context() -> Any:
            ctx_mod.enter(ctx)
            task = asyncio.current_task() if held else None
            if task is not None:
                ctx_mod.thread_waits_for(task)
            try:
                if tracer is None or traced is None:
                    return await awaitable
                with tracing.span(tracer, traced, self.display, self.actor_id):
                    return await awaitable
            except (SystemExit, KeyboardInterrupt) as exc:
                # asyncio lets these end the loop's thread, leaving this task's future (and the
                # actor thread waiting on it, and every later call) pending for ever: they fail
                # the actor instead, as they do in a def endpoint.
                raise _Fatal(exc) from exc
            finally:
                if task is not None:
                    ctx_mod.thread_waited_for(task)

        return asyncio.run_coroutine_threadsafe(in_context(), self._ensure_loop())

    def _run_async(self, awaitable: Awaitable[Any]) -> Any:
        """Run ``awaitable`` on the actor's loop and wait for it (from the actor's thread, or
        the proc's as it shuts down)."""
        return self._schedule(awaitable, held=threading.get_ident() == self._thread.ident).result()

    def _call(self, call_id: int, channel: Channel | None, header: tuple[Any, ...], segments: envelopes.Received,
              started: float) -> Any:
        """Run the call (``started``: when, by ``time.perf_counter``); its result, or
        ``_NO_REPLY_YET`` where the reply goes out later (a port, a concurrent endpoint's task)."""
        _, _, _, method, index, labels, sizes = header
        args: tuple[Any, ...]
        kwargs: dict[str, Any]
        if len(segments) == 1 and segments[0] == _NO_ARGUMENTS:  # a call without arguments: no unpickling
            args, kwargs = (), {}
        else:
            args, kwargs = serialization.loads(segments)
        try:
            context = self._contexts[(index, labels, sizes)]
        except (KeyError, TypeError):  # not kept yet (or not hashable)
            context = self._message_context(index, labels, sizes)
        _enter(context)
        fn, explicit, untraced, concurrent, coroutine = self._plans.get(method) or self._plan(method)
        if explicit:
            args = (ports.response_port(functools.partial(self._port_reply, channel, call_id, method, started)), *args)
        traced = None if untraced else method
        # No OpenTelemetry loaded (the common case): no tracer, without asking tracing.tracer().
        tracer = None if traced is None or tracing.OPENTELEMETRY not in sys.modules else tracing.tracer()
        try:
            if tracer is None or traced is None or coroutine:
                result = fn(self._instance, *args, **kwargs)  # a coroutine is traced where it runs
            else:
                with tracing.span(tracer, traced, self.display, self.actor_id):
                    result = fn(self._instance, *args, **kwargs)
                traced = None  # its span has ended (an awaitable it returned runs untraced)
            if concurrent:
                self._schedule(result, traced).add_done_callback(
                    functools.partial(self._task_done, channel, call_id, method, explicit, started))
                return _NO_REPLY_YET
            if result is not None and inspect.isawaitable(result):
                held = self._held = self._schedule(result, traced, held=True)
                if self._closing is not None:  # close() came before _held was set: it did not see it
                    held.cancel()
                try:
                    result = self._wait_for(held, method)
                finally:
                    self._held = None
        except BaseException as exc:
            if explicit:  # it had a port to answer through: raising instead kills the actor, as in Monarch
                raise _Fatal(exc) from exc
            raise
        return _NO_REPLY_YET if explicit else result

    def _wait_for(self, held: concurrent.futures.Future[Any], method: str) -> Any:
        """The outcome of the ``async def`` endpoint ``method`` running on the actor's loop. The
        loop's thread rings this thread's bell as it ends, and the wait wakes ahead of the end
        its recent runs expect (runtime/ahead.py): after a long step this thread, which sends
        the reply, is awake for it, where a plain wait for the future paid a wake-up first."""
        bell = self._bell
        held.add_done_callback(lambda _: bell.ring())  # at once if done already: a ring left, harmless
        ahead.wait_on(bell, held.done, method)
        return held.result()

    def _plan(self, method: str) -> _Plan:
        """How to call ``method``: looked up and checked on its first call, then kept (the class
        of an actor does not change while it runs)."""
        cls = type(self._instance)
        fn = getattr(cls, method, None)
        if fn is None or method.startswith("_") or not callable(fn):
            raise AttributeError(f"{cls.__qualname__}.{method} is not an endpoint")
        coroutine = inspect.iscoroutinefunction(fn)
        if not is_endpoint(fn) and coroutine and not any(
            inspect.iscoroutinefunction(getattr(cls, n)) for n in endpoint_names(cls)
        ):  # reached through as_endpoint
            raise TypeError(
                f"{cls.__qualname__}.{method} is an async def method, but this actor's endpoints are all def "
                "(it has no event loop); make the method a def, or the actor's endpoints async"
            )
        plan = self._plans[method] = (fn, bool(getattr(fn, EXPLICIT_PORT, False)), bool(getattr(fn, UNTRACED, False)),
                                      bool(getattr(fn, CONCURRENT, False)), coroutine)
        return plan

    def _message_context(self, index: int, labels: tuple[str, ...], sizes: tuple[int, ...]) -> ctx_mod.Context:
        """The context of a message sent to point ``index`` of slice (labels, sizes); the few
        slices an actor is called through are kept, so a call makes no new objects for it."""
        assert self._context is not None
        key = (index, labels, sizes)
        try:
            found = self._contexts.get(key)
        except TypeError:  # a sender with list-valued labels: correct, only not kept
            return ctx_mod.Context(self._context.actor_instance, Point(index, Extent(labels, sizes)))
        if found is None:
            if len(self._contexts) >= CONTEXTS_KEPT:
                self._contexts.clear()
            found = self._contexts[key] = ctx_mod.Context(self._context.actor_instance, Point(index, Extent(labels, sizes)))
        return found

    def _port_reply(self, channel: Channel | None, call_id: int, method: str, started: float, ok: bool, value: Any) -> None:
        """An explicit port's reply, from whichever thread sends it (the actor's, its loop's,
        another of the actor's, the I/O thread for a port sent from another proc)."""
        if isinstance(value, ports.Encoded):  # sent from another proc: pass the bytes on as they are
            reply(channel, call_id, peers.OK if ok else peers.ERROR, value.segments)
        elif ok:
            _reply_value(channel, call_id, method, value)
        else:  # port.exception(e): the caller raises e itself
            reply(channel, call_id, peers.ERROR, messages.encode_failure(value, sent=True))
        _replied_after(started, call_id)

    def _task_done(self, channel: Channel | None, call_id: int, method: str, explicit: bool, started: float,
                   task: concurrent.futures.Future[Any]) -> None:
        """A concurrent endpoint (its call ``started`` then, by ``time.perf_counter``) finished
        (on the loop's thread)."""
        if task.cancelled():  # the actor stopped or failed under it: its caller must hear, not wait
            why = self.end_report or self._closing or f"actor {self.display} ended while the call ran, which was cancelled"
            reply(channel, call_id, messages.DEAD, [why.encode()])
            return
        exc = task.exception()
        if exc is None:
            if not explicit:  # a port's reply went out through _port_reply
                _reply_value(channel, call_id, method, task.result())
                _replied_after(started, call_id)
        elif call_id != peers.NO_REPLY and isinstance(exc, Exception) and not isinstance(exc, _Fatal) and not explicit:
            reply(channel, call_id, peers.ERROR, messages.encode_failure(exc))  # no wake: as a plain one that raised
        else:  # no caller to tell: the actor fails, on its own thread
            self.submit((call_id, channel, (call_id, FAILED_TASK, exc), []))

    def _cancel_tasks(self) -> None:
        """Cancel the concurrent endpoints still running (they see CancelledError), and wait."""
        if self._loop is None:
            return
        import asyncio

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(timeout=CANCEL_TIMEOUT)
        except Exception:
            print(f"procmesh: tasks of actor {self.name!r} did not end within {CANCEL_TIMEOUT} s of cancellation", file=sys.stderr)

    def cleanup(self, exc: BaseException | None) -> None:
        """Cancel running concurrent endpoints, then run ``__cleanup__`` (as Monarch orders them),
        then stop the meshes the actor made (its children), which ``__cleanup__`` may still use.
        Once: the proc's shutdown and a stop sent by the actor's owner may both ask; the second
        waits for the first (the proc must not end under a cleanup still running)."""
        with self._watch_lock:
            first, self._cleaning = not self._cleaning, True
        if not first:
            self._cleaned.wait(CHILD_STOP_SECONDS)
            return
        try:
            self._clean_up(exc)
        finally:
            self._cleaned.set()

    def _clean_up(self, exc: BaseException | None) -> None:
        self._cancel_tasks()
        hook = getattr(self._instance, "__cleanup__", None)
        if hook is not None:
            try:
                result = hook(exc)
                if inspect.isawaitable(result):
                    self._run_async(result)
            except Exception:
                print(f"procmesh: __cleanup__ of actor {self.name!r} raised:", file=sys.stderr)
                traceback.print_exc()
        self._stop_children()

    def _stop_children(self) -> None:
        """Stop the meshes this actor made, newest first (an actor mesh before the procs it runs
        on), each given CHILD_STOP_SECONDS: as Monarch, an actor's children end with it."""
        if self._context is None:
            return
        children = self._context.actor_instance.children
        while children:
            child = children.pop(next(reversed(children)))
            try:
                child.stop(f"its owner {self.display} ended").get(timeout=CHILD_STOP_SECONDS)
            except Exception as exc:
                print(f"procmesh: stopping {child!r}, made by actor {self.display}, as it ended: {exc}",
                      file=sys.stderr, flush=True)


def _flush(channels: set[Channel]) -> None:
    """Write the replies held on ``channels`` (a caller that went away is not an error of ours)."""
    for channel in channels:
        channel.flush()
    channels.clear()


class _Fatal(Exception):
    """An exception that fails the actor even though its call has a caller."""

    def __init__(self, exception: BaseException) -> None:
        super().__init__(exception)
        self.exception = exception


class _Unhandled(Exception):
    """``__supervise__`` is missing or returned a falsy value: the failure climbs to the owner."""


def _replied_after(started: float, call_id: int) -> None:
    """A reply sent from a thread that is not to spin for the actor's next call (the actor's
    loop, which cannot; a port's sender, which may be any) for a call ``started`` then (by
    ``time.perf_counter``): if the call ran long, wake the proc's I/O thread for the next one
    (runtime/ahead.py), as the actor's thread does after a plain endpoint's reply."""
    if call_id != _NO_REPLY and waits.WAKE_AHEAD_NS:
        ahead.after_long_work(time.perf_counter() - started)


def _reply_value(channel: Channel | None, call_id: int, method: str, value: Any) -> None:
    """Send a concurrent endpoint's (or its port's) value, or, when it cannot be pickled, why."""
    try:
        payload = serialization.dumps(value)
    except Exception as exc:
        reply(channel, call_id, peers.ERROR, messages.encode_failure(_unsendable(method, value, exc)))
        return
    reply(channel, call_id, peers.OK, payload)


def _unsendable(method: str, result: Any, exc: Exception) -> TypeError:
    """The error of an endpoint whose return value cannot be pickled (its caller gets it, not
    a pickling traceback that reads as if the endpoint itself had raised)."""
    return TypeError(f"the return value of {method} ({type(result).__qualname__}) cannot be pickled to send it "
                     f"back: {type(exc).__name__}: {messages.text_of(exc)}")


def _aborted(exc: BaseException) -> str:
    return "actor explicitly aborted due to: " + messages.Failure.capture(exc).traceback.rstrip()
