"""The I/O thread: one selector loop per process that reads every socket and runs timers.

Callbacks that run here (frame handling, resolving futures, queueing work for actors) never
block. Writes happen in the threads that produce the data (:mod:`.channel`), so a slow reader
only slows its own writer.
"""

from __future__ import annotations

import heapq
import itertools
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Readable(Protocol):
    """What the reactor watches. A handler with a true ``prioritized`` attribute is served
    before the others that are ready at the same time."""

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
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._pending: list[Callable[[], None]] = []
        self._pending_lock = threading.Lock()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._pushes = 0  # timers pushed since the last purge of cancelled ones
        # True from just before the loop checks for pending callbacks until select returns:
        # only then does call_soon need the wake-up pipe (set before the check, so a callback
        # added after the check always sees it; the GIL orders the two).
        self._selecting = True
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
            try:
                self._selector.register(handler.fileno(), selectors.EVENT_READ, handler)
            except KeyError:
                pass  # already registered

        add() if self.on_thread else self.call_soon(add)

    def unregister(self, handler: Readable) -> None:
        def drop() -> None:
            try:
                self._selector.unregister(handler.fileno())
            except (KeyError, ValueError, OSError):
                pass

        if self.on_thread:
            drop()
        else:
            self.call_soon(drop)

    def _run(self) -> None:
        while True:
            timeout = None
            while self._timers and self._timers[0][2].cancelled:
                heapq.heappop(self._timers)
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - time.monotonic())
            self._selecting = True
            if self._pending:  # added while the loop was awake: do not sleep on them
                timeout = 0.0
            events = self._selector.select(timeout)
            self._selecting = False
            if len(events) > 1:  # authenticated peers first: a flood of strangers waits its turn
                events.sort(key=_priority)
                if len(events) > self.OTHERS_PER_PASS:
                    # The selector is level-triggered: those left out are ready again at the next
                    # select, after prioritized handlers, callbacks and timers have had a turn.
                    others = next((i for i, e in enumerate(events) if _priority(e)), len(events))
                    del events[others + self.OTHERS_PER_PASS :]
            for key, _ in events:
                handler = key.data
                if handler is None:
                    try:
                        self._wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                    continue
                try:
                    handler.on_readable()
                except Exception as exc:  # a handler bug must not stop all I/O
                    _report(f"procmesh: I/O handler {handler!r} failed: {exc!r}")
            if self._pending:
                with self._pending_lock:
                    pending, self._pending = self._pending, []
                for fn in pending:
                    try:
                        fn()
                    except Exception as exc:
                        _report(f"procmesh: I/O callback failed: {exc!r}")
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                _, _, timer = heapq.heappop(self._timers)
                due = timer.fn
                if due is None:
                    continue
                timer.fn = None
                try:
                    due()
                except Exception as exc:
                    _report(f"procmesh: timer failed: {exc!r}")


def _priority(event: tuple[selectors.SelectorKey, int]) -> int:
    """Sort key of a ready handler: 0 for those marked ``prioritized`` (and the wake-up pipe)."""
    handler = event[0].data
    return 0 if handler is None or getattr(handler, "prioritized", False) else 1


def _report(message: str) -> None:
    import sys
    import traceback

    print(message, file=sys.stderr)
    traceback.print_exc()


_reactor: Reactor | None = None
_reactor_lock = threading.Lock()


def get_reactor() -> Reactor:
    """The process's reactor, started on first use (and again in a forked child)."""
    global _reactor
    if _reactor is None or _reactor._pid != os.getpid():
        with _reactor_lock:
            if _reactor is None or _reactor._pid != os.getpid():
                _reactor = Reactor()
    return _reactor
