"""Small frames held back under load and written together: one ``sendmsg`` for many messages.

A :class:`~mesh_client._src.runtime.channel.Channel` keeps one :class:`Outbox`. A sender that
knows more is coming (a peer with calls already in flight, an actor thread with more work
queued) asks the channel to *hold* its frame instead of writing it; the held frames go out, in
order, in one write when the first of these comes:

- the next frame that is not held (it is written behind them, in the same write),
- the outbox reaching :attr:`Outbox.MAX_BYTES` or :attr:`Outbox.MAX_FRAMES`,
- a thread about to wait for a result (:func:`waiting`, from ``Future.get`` and ``await``),
- an actor thread whose queue ran dry,
- the reactor, :data:`HOLD_SECONDS` after the batch began (a timer the channel sets when it
  starts holding), so a held frame never waits longer than that, even if its sender never
  waits for anything.

Why a timer and not the reactor's very next pass: a reactor woken to write a batch of one frame
wins the GIL back from the sender at once (its ``select`` returns before the sender's thread is
even scheduled), and the two threads then take turns over batches of one or two frames, each
turn costing a wake-up: more than the writes it saves. A short timer lets the reactor sleep
while the sender fills the batch, and bounds how long any frame is held.

A frame is held only while it is small (:attr:`Outbox.MAX_FRAME`) and is copied into the
outbox, so the sender's buffers may change as soon as ``send`` returns, as with a direct write.

This module is the pure part (the bytes and the bounds) and the process-wide list of channels
holding frames; the writing, its lock and its errors are the channel's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Protocol

#: The longest a held frame waits for its batch to be written (by the reactor's timer).
HOLD_SECONDS = 0.0002


class Flushable(Protocol):
    def flush(self, block: bool = True) -> None: ...


# What Outbox.hold did with a frame.
REFUSED, BEGAN, HELD, FULL = 0, 1, 2, 3


class Outbox:
    """The held frames of one connection, in the order they were sent, as one buffer."""

    __slots__ = ("_data", "frames")

    # A frame larger than this is never held: the copy would cost more than the write it saves.
    MAX_FRAME = 16 * 1024
    # Held frames are written once there are this many bytes or frames of them.
    MAX_BYTES = 64 * 1024
    MAX_FRAMES = 128

    def __init__(self) -> None:
        self._data = bytearray()
        self.frames = 0  # frames held: nonzero exactly while bytes are (the hot path's emptiness test)

    def __repr__(self) -> str:
        return f"<Outbox {self.frames} frames, {len(self._data)} bytes>"

    def __len__(self) -> int:
        return len(self._data)

    def hold(self, pieces: Sequence[bytes | bytearray | memoryview]) -> int:
        """Append one frame (copied) if it is small: :data:`BEGAN` (the outbox was empty: a new
        batch), :data:`HELD`, :data:`FULL` (held, and the batch is to be written now), or
        :data:`REFUSED` (too large to hold: nothing appended). One call per frame, on the hot path."""
        data = self._data
        before = len(data)
        for p in pieces:
            data += p
        if len(data) - before > self.MAX_FRAME:
            del data[before:]
            return REFUSED
        self.frames += 1
        if self.frames >= self.MAX_FRAMES or len(data) >= self.MAX_BYTES:
            return FULL
        return BEGAN if before == 0 else HELD

    def take(self) -> bytearray:
        """Everything held, emptying the outbox (the caller writes it)."""
        data, self._data, self.frames = self._data, bytearray(), 0
        return data

    def append(self, data: bytes | bytearray) -> None:
        """Bytes to go out behind everything held, whatever their size (frames the reactor
        could not write at once: it never waits for a socket)."""
        if data:
            self._data += data
            self.frames += 1

    def put_back(self, rest: bytearray) -> None:
        """Bytes of a taken batch that could not be written yet: they go before anything held since."""
        if rest:
            if self._data:
                self._data[:0] = rest
            else:  # taken as they are: a large rest is not copied again
                self._data = rest
            self.frames = max(self.frames, 1)

    def extend(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        """One frame's pieces behind everything held (copied once, whatever its size)."""
        data = self._data
        before = len(data)
        for p in pieces:
            data += p
        if len(data) > before:
            self.frames += 1


# Channels holding frames, for threads about to wait (flush_all). A dict, not a set: ordered,
# so the oldest batch goes first.
_holding: dict[Flushable, None] = {}
_holding_lock = threading.Lock()


def _forget_all_in_child() -> None:
    """A forked child shares its parent's sockets: what the parent held is the parent's to write."""
    global _holding_lock
    _holding.clear()
    _holding_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_all_in_child)


def note(channel: Flushable) -> None:
    """``channel`` started holding frames."""
    with _holding_lock:
        _holding[channel] = None


def forget(channel: Flushable) -> None:
    """``channel`` holds nothing any more."""
    with _holding_lock:
        _holding.pop(channel, None)


_threads = threading.local()  # .burst: this thread sent, and has not waited for a result since


def sending() -> bool:
    """Note a send by this thread; True if it sent before without waiting for a result in
    between (it is issuing calls back to back: a burst, worth holding frames for)."""
    burst: bool = getattr(_threads, "burst", False)
    if not burst:
        _threads.burst = True
    return burst


def waiting() -> None:
    """This thread is about to wait for a result: write what is held, and its next send
    begins a new burst (a caller that waits after every call never has its frames held)."""
    _threads.burst = False
    flush_all()


def flush_all() -> None:
    """Write what every channel holds, as far as each socket takes it now (never blocking: a
    stuck peer must not hold up a wait for another one; the reactor retries what is left)."""
    if not _holding:
        return
    with _holding_lock:
        channels = list(_holding)
    for channel in channels:
        channel.flush(block=False)
