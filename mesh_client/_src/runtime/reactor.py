"""The I/O thread: one poll loop per process that reads every socket and runs timers.

Callbacks that run here (frame handling, resolving futures, queueing work for actors) never
block. Writes happen in the threads that produce the data (:mod:`.channel`), so a slow reader
only slows its own writer.

The loop waits on the kernel's poller itself (``select.epoll``; ``select.poll`` where there is
no epoll) with a plain map of descriptors to handlers, not through :mod:`selectors`, whose
key objects and event translation cost a few microseconds per wake-up, twice per call. Its poll
spins briefly before it sleeps, and the threads its handlers woke (actors, waiting callers) are
rung only once it has released the GIL (:mod:`.waits`).
"""

from __future__ import annotations

import heapq
import itertools
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mesh_client._src.runtime import waits


class Readable(Protocol):
    """What the reactor watches: readable, or hung up or in error (``on_readable`` finds out
    which). A handler with a true ``prioritized`` attribute is served before the others that
    are ready at the same time."""

    def fileno(self) -> int: ...
    def on_readable(self) -> None: ...


class Timer:
    """A pending ``call_later``; :meth:`cancel` drops the callback (and what it refers to) at once."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn: Callable[[], None] | None = fn

    def cancel(self) -> None:
        self.fn = None

    @property
    def cancelled(self) -> bool:
        return self.fn is None


class Reactor:
    """A daemon thread running a selector; thread-safe ``register``, ``call_soon``, ``call_later``.

    ``register``/``unregister`` of a handler that is already (not) registered are no-ops, so a
    listener can be paused and resumed freely.
    """

    def __init__(self, name: str = "procmesh-io") -> None:
        self._poller = _Poller()
        self._handlers: dict[int, Readable] = {}  # descriptor -> handler, touched on this thread only
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._wake_fd = self._wake_r.fileno()
        self._poller.register(self._wake_fd)
        self._pending: list[Callable[[], None]] = []
        self._pending_lock = threading.Lock()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._pushes = 0  # timers pushed since the last purge of cancelled ones
        # True from just before the loop checks for pending callbacks until select returns:
        # only then does call_soon need the wake-up pipe (set before the check, so a callback
        # added after the check always sees it; the GIL orders the two).
        self._selecting = True
        # Until when (time.monotonic_ns) its poll spins whatever its pace: a message is due
        # (wake_ahead).
        self._spin_until_ns = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pid = os.getpid()
        self._thread.start()

    @property
    def on_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident  # cheaper than current_thread()

    def call_soon(self, fn: Callable[[], None]) -> None:
        with self._pending_lock:
            self._pending.append(fn)
        if not self._selecting:  # awake: it runs pending callbacks before it selects again
            return
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # the wake-up pipe is full: the loop is already going to wake

    def wake_ahead(self, spin_until_ns: int) -> None:
        """A message is due soon: have the loop's poll spin until ``spin_until_ns``
        (``time.monotonic_ns``) rather than sleep, woken now if it sleeps (:mod:`.ahead`)."""
        if spin_until_ns > self._spin_until_ns:
            self._spin_until_ns = spin_until_ns
        if self._selecting and not self.on_thread:
            try:
                self._wake_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass  # the wake-up pipe is full: the loop is already going to wake

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` on the reactor thread after ``delay`` seconds, unless cancelled first."""
        when = time.monotonic() + delay
        timer = Timer(fn)
        entry = (when, next(self._seq), timer)
        if self.on_thread:
            self._push_timer(entry)
        else:
            self.call_soon(lambda: self._push_timer(entry))
        return timer

    # Handlers not marked prioritized served per pass of the loop, so that a burst of them
    # (a flood of unauthenticated connections) delays an authenticated reply by a bounded time.
    OTHERS_PER_PASS = 32

    # Cancelled timers stay in the heap (as empty handles) until due; past this many, and more
    # than half the heap, the heap is rebuilt so a flood of short-lived timers cannot pile up.
    PURGE_AT = 1024

    def _push_timer(self, entry: tuple[float, int, Timer]) -> None:
        heapq.heappush(self._timers, entry)
        self._pushes += 1
        if self._pushes >= self.PURGE_AT:
            self._pushes = 0
            live = [e for e in self._timers if not e[2].cancelled]
            if len(live) * 2 < len(self._timers):
                heapq.heapify(live)
                self._timers = live

    def register(self, handler: Readable) -> None:
        def add() -> None:
            fd = handler.fileno()
            if fd < 0 or fd in self._handlers:
                return  # closed, or already registered
            self._poller.register(fd)
            self._handlers[fd] = handler

        add() if self.on_thread else self.call_soon(add)

    def unregister(self, handler: Readable) -> None:
        def drop() -> None:
            fd = handler.fileno()
            if self._handlers.get(fd) is not handler:
                return  # not registered (or that descriptor is another handler's now)
            del self._handlers[fd]
            try:
                self._poller.unregister(fd)
            except (ValueError, OSError):
                pass  # closed already: the kernel dropped it from its set with the descriptor

        if self.on_thread:
            drop()
        else:
            self.call_soon(drop)

    def _drain_wakeups(self) -> None:
        try:
            self._wake_r.recv(4096)
        except BlockingIOError:
            pass

    def _run(self) -> None:
        rings = waits.deferred()  # rung by the poll, once it has released the GIL
        while True:
            timeout = None
            while self._timers and self._timers[0][2].cancelled:
                heapq.heappop(self._timers)
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - time.monotonic())
            self._selecting = True
            if self._pending:  # added while the loop was awake: do not sleep on them
                timeout = 0.0
            spin_until_ns = self._spin_until_ns
            try:
                ready = self._poller.poll(timeout, rings, spin_until_ns)
            except InterruptedError:
                ready = []
            self._selecting = False
            handlers = self._handlers
            served: list[Readable] = []
            others: list[Readable] = []
            for fd, _ in ready:
                found = handlers.get(fd)
                if found is not None:
                    # Authenticated peers first: a flood of strangers waits its turn.
                    (served if getattr(found, "prioritized", False) else others).append(found)
                elif fd == self._wake_fd:
                    self._drain_wakeups()
            if spin_until_ns and (served or others) and self._spin_until_ns == spin_until_ns:
                self._spin_until_ns = 0  # what was due has come (a later wake_ahead stays)
            # The poller is level-triggered: those left out are ready again at the next poll,
            # after prioritized handlers, callbacks and timers have had a turn.
            served += others[: self.OTHERS_PER_PASS]
            for handler in served:
                try:
                    handler.on_readable()
                except BaseException as exc:  # a handler bug (a SystemExit too) must not stop all I/O
                    _report(f"procmesh: I/O handler {handler!r} failed: {exc!r}")
            if self._pending or self._timers:
                waits.flush()  # callbacks and timers may block: wake whom the handlers woke first
            if self._pending:
                with self._pending_lock:
                    pending, self._pending = self._pending, []
                for fn in pending:
                    try:
                        fn()
                    except BaseException as exc:  # as a handler's
                        _report(f"procmesh: I/O callback failed: {exc!r}")
            now = time.monotonic() if self._timers else 0.0
            while self._timers and self._timers[0][0] <= now:
                _, _, timer = heapq.heappop(self._timers)
                due = timer.fn
                if due is None:
                    continue
                timer.fn = None
                try:
                    due()
                except BaseException as exc:  # as a handler's
                    _report(f"procmesh: timer failed: {exc!r}")


class _Poller:
    """The kernel's readiness poller for input: epoll on Linux, poll(2) elsewhere."""

    def __init__(self) -> None:
        self._epoll = hasattr(select, "epoll")
        self._kernel: Any = select.epoll() if self._epoll else select.poll()
        self._events = select.EPOLLIN if self._epoll else select.POLLIN
        self._pace = waits.native.Pace() if waits.native is not None else None  # spins while waits are short

    def register(self, fd: int) -> None:
        self._kernel.register(fd, self._events)

    def unregister(self, fd: int) -> None:
        self._kernel.unregister(fd)

    def poll(self, timeout: float | None, rings: list[waits.Bell], spin_until_ns: int = 0) -> list[tuple[int, int]]:
        """Ring ``rings`` (and empty the list), then return the descriptors ready within
        ``timeout`` seconds (None: wait as long as it takes), spinning first where
        :data:`waits.POLL_SPIN_NS` says so, or until ``spin_until_ns`` (``time.monotonic_ns``)
        where that is later. ``rings`` is this thread's deferred list."""
        if self._epoll and _native_poll is not None:
            rung = len(rings)
            spin_ns, pace = waits.POLL_SPIN_NS, self._pace
            if spin_until_ns:
                due_spin = spin_until_ns - time.monotonic_ns()
                if due_spin > 0:
                    spin_ns, pace = due_spin, None  # a message is due: spin whatever the pace
            try:
                ready: list[tuple[int, int]] = _native_poll(self._kernel.fileno(), timeout, spin_ns, rings, pace)
            except BaseException:
                waits.flush()  # rung already where the poll got that far: a ring more merges
                raise
            # Only those it rang: a finalizer that the poll's own allocations ran (gc, on this
            # thread) may have deferred a ring since, which the next poll rings first.
            del rings[:rung]
            return ready
        waits.flush()  # rings is this thread's deferred list
        if self._epoll:
            ready = self._kernel.poll(-1 if timeout is None else timeout)
        else:
            ready = self._kernel.poll(None if timeout is None else timeout * 1000)
        return ready


_native_poll = waits.native.poll if waits.native is not None else None


def _report(message: str) -> None:
    import sys
    import traceback

    print(message, file=sys.stderr)
    traceback.print_exc()


_reactor: Reactor | None = None
_reactor_lock = threading.Lock()


def on_reactor_thread() -> bool:
    """Whether this is the process's I/O thread (without starting one)."""
    reactor = _reactor
    return reactor is not None and reactor._pid == os.getpid() and reactor.on_thread


def get_reactor() -> Reactor:
    """The process's reactor, started on first use (and again in a forked child)."""
    global _reactor
    if _reactor is None or _reactor._pid != os.getpid():
        with _reactor_lock:
            if _reactor is None or _reactor._pid != os.getpid():
                _reactor = Reactor()
    return _reactor
