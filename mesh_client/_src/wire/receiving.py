"""Receive buffers of a large frame: each large segment is read straight into its final object.

Used by :mod:`.protocol` once an authenticated frame's header says the frame is large. A
segment of at least :data:`OWN_BUFFER` bytes gets an object of its own, of exactly its length:
a ``bytes`` when the sender flagged it read-only (:data:`.frames.READ_ONLY`: it pickled a
``bytes``), a ``bytearray`` otherwise. The socket fills that object, and :mod:`.serialization`
hands it to the unpickler as the out-of-band buffer, so a ``bytes``, ``bytearray`` or numpy
argument IS the memory the kernel copied into: no copy in user space on the receiving side.
Runs of smaller segments share one ``bytearray`` and are handed over as views of it.

The objects are allocated without zeroing (``PyBytes_FromStringAndSize(NULL, n)`` and its
bytearray twin, through ctypes, as ``socket.recv`` does in C): every byte is written by the
socket before anyone but this module sees the object, and a frame cut short is dropped whole.
Zeroing 1 MiB costs about as much as receiving it. Where ctypes or the CPython layout is not
available, plain zeroed ``bytearray`` objects are used (and ``bytes`` arguments are copied once
when unpickled). Sizes come only from an authenticated header already checked against the
connection's limit (:mod:`.protocol`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mesh_client._src.wire import errors, frames

# A segment at least this large is received into an object of its own (the size from which
# senders flag read-only segments: each such segment can become a bytes object).
OWN_BUFFER = frames.FLAGGED_FROM

Target = bytes | bytearray


def _uninitialized_allocators() -> tuple[Any, Any, int] | None:
    """(new bytes, new bytearray, offset of a bytes object's data), or None where unavailable."""
    try:
        import ctypes

        make = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t)
        new_bytes = make(("PyBytes_FromStringAndSize", ctypes.pythonapi))
        new_bytearray = make(("PyByteArray_FromStringAndSize", ctypes.pythonapi))
        offset = bytes.__basicsize__ - 1  # PyBytesObject: header, then ob_sval
        probe = new_bytes(None, 8)
        window = (ctypes.c_char * 8).from_address(id(probe) + offset)
        memoryview(window).cast("B")[:] = b"procmesh"
        if probe != b"procmesh" or type(new_bytearray(None, 8)) is not bytearray:
            return None
        return new_bytes, new_bytearray, offset
    except (ImportError, AttributeError, OSError, TypeError, ValueError):
        return None


_ALLOC = _uninitialized_allocators()


def allocate(size: int, read_only: bool) -> tuple[Target, memoryview]:
    """A new object of ``size`` bytes, not zeroed, and a writable view of all of it.

    The view is the only way to write a ``bytes`` object, and it keeps the object alive; drop
    it once the object is filled. Fall back to a zeroed ``bytearray`` without ctypes."""
    if _ALLOC is None:
        target = bytearray(size)
        return target, memoryview(target)
    new_bytes, new_bytearray, offset = _ALLOC
    if not read_only:
        array: bytearray = new_bytearray(None, size)
        return array, memoryview(array)
    import ctypes

    data: bytes = new_bytes(None, size)
    window = (ctypes.c_char * size).from_address(id(data) + offset)
    window.owner = data  # type: ignore[attr-defined]  # the view keeps the bytes object alive
    return data, memoryview(window).cast("B")


def copy_free() -> bool:
    """Whether ``bytes`` segments are received into ``bytes`` objects (no copy when unpickled)."""
    return _ALLOC is not None


class LargeFrame:
    """The buffers of one large frame being received, filled in order by :meth:`view`/:meth:`filled`.

    Each buffer is allocated when the frame reaches it (the first one with the header), not all
    when the header declares them: a header costs one buffer, however many segments it announces
    (one segment as large as the limit is still allocated whole)."""

    __slots__ = ("kind", "_segments", "_plan", "_current", "_view", "_left")

    def __init__(self, kind: frames.Kind, fields: Sequence[int]) -> None:
        """``fields``: the header's length fields, flags included (see :func:`frames.split_field`)."""
        self.kind = kind
        # One entry per buffer, in order: the lengths of its segments, whether it is one
        # segment's own buffer, and whether that is read-only (a bytes object).
        plan: list[tuple[list[int], bool, bool]] = []
        run: list[int] = []  # lengths of the run of small segments being gathered
        for field in fields:
            n, read_only = frames.split_field(field)
            if n >= OWN_BUFFER:
                if run:
                    plan.append((run, False, False))
                    run = []
                plan.append(([n], True, read_only))
            else:
                run.append(n)
        if run:
            plan.append((run, False, False))
        self._plan = plan
        self._segments: list[bytes | bytearray | memoryview] = []
        self._current = -1
        self._view = _FILLED
        self._left = 0
        self._next()

    def _next(self) -> None:
        """Allocate the next buffer that has bytes to come (empty ones only add their segments)."""
        plan, segments = self._plan, self._segments
        while True:
            self._current += 1
            if self._current >= len(plan):
                self._view, self._left = _FILLED, 0
                return
            lengths, own, read_only = plan[self._current]
            total = sum(lengths)
            try:
                if own:
                    target, view = allocate(total, read_only)
                else:
                    view = allocate(total, False)[1]
            except MemoryError:  # within the limit, but more than this process can have now
                frame = sum(sum(entry[0]) for entry in plan)
                raise errors.FrameTooLarge(f"frame of {frame} bytes cannot be received: this process cannot "
                                           f"allocate that much memory now") from None
            if own:
                segments.append(target)
            else:
                at = 0
                for n in lengths:
                    segments.append(view[at : at + n])
                    at += n
            if total:
                self._view, self._left = view, total
                return

    @property
    def complete(self) -> bool:
        return self._current >= len(self._plan)

    def view(self) -> memoryview:
        """Where the next bytes of the frame go (the unfilled rest of one buffer)."""
        whole = self._view
        return whole[whole.nbytes - self._left :]

    def filled(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last :meth:`view`."""
        self._left -= nbytes
        if self._left == 0 and self._current < len(self._plan):
            self._view = _FILLED  # drop the writable view of a bytes object
            self._next()

    def feed(self, data: bytes | bytearray | memoryview) -> int:
        """Copy the frame's bytes that were already read (into the connection's buffer); returns
        how many of ``data`` belonged to this frame."""
        source = data if type(data) is memoryview else memoryview(data)
        used = 0
        while used < source.nbytes and not self.complete:
            target = self.view()
            n = min(target.nbytes, source.nbytes - used)
            target[:n] = source[used : used + n]
            used += n
            self.filled(n)
        return used

    def segments(self) -> list[bytes | bytearray | memoryview]:
        """The frame's segments, once :attr:`complete`."""
        return self._segments


_FILLED = memoryview(b"")
