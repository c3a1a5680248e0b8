"""Log lines that an attacker cannot multiply: one line at once, then one summary per period.

Used by :mod:`.dispatch` for refused connections and by :mod:`.accepting` for descriptor
exhaustion; :mod:`.main` flushes the summaries as the proc stops, so the events of its last
period are counted too. Pure logic: the clock and the scheduler are injected, so tests drive time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

Scheduler = Callable[[float, Callable[[], None]], Any]  # e.g. Reactor.call_later


def write_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RateLimitedLog:
    """The first event of a quiet spell is written in full; later ones are counted and written
    as one summary line per ``period`` seconds, until a whole period passes without any."""

    def __init__(
        self,
        what: str,
        schedule: Scheduler,
        *,
        period: float = 10.0,
        write: Callable[[str], None] = write_stderr,
    ) -> None:
        self.what = what  # a plural noun phrase: "refused connections"
        self.period = period
        self._schedule = schedule
        self._write = write
        self._open = False  # a period is running: further events are only counted
        self._count = 0
        self._last = ""
        self.lines_written = 0
        self.events = 0
        # Channels close on any thread (a failed send closes on the sender's), so one lock.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<RateLimitedLog {self.what}: {self.events} events, {self.lines_written} lines>"

    def note(self, line: str) -> None:
        """One event; ``line`` says what happened (written now only if the log was quiet)."""
        with self._lock:
            self.events += 1
            if self._open:
                self._count += 1
                self._last = line
                return
            self._open = True
        self._emit(line)
        self._schedule(self.period, self._end_period)

    def flush(self) -> None:
        """Write the summary of the period running now, if it counted any event: a process that
        ends before the period does (a proc stopped within 10 s of a flood) would lose them."""
        with self._lock:
            count, last = self._take()
        if count:
            self._summarize(count, last)

    def _end_period(self) -> None:
        with self._lock:
            count, last = self._take()
            if not count:
                self._open = False
                return
        self._summarize(count, last)
        self._schedule(self.period, self._end_period)

    def _take(self) -> tuple[int, str]:
        """With the lock held: the events counted since the last line, and the last of them."""
        count, last = self._count, self._last
        self._count, self._last = 0, ""
        return count, last

    def _summarize(self, count: int, last: str) -> None:
        last = last.removeprefix("procmesh: ")  # the summary line has the prefix once
        self._emit(f"procmesh: {count} more {self.what} in the last {self.period:g} s (the last: {last})")

    def _emit(self, line: str) -> None:
        self.lines_written += 1
        self._write(line)


class Backoff:
    """Growing delays (doubling from ``first`` up to ``cap``) until :meth:`reset`."""

    def __init__(self, first: float = 0.001, cap: float = 0.25) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.first
