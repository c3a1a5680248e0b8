"""A proc's stdout and stderr write whole lines.

The procs of a local mesh share the controller's terminal (and a pod's two streams are read line
by line by the kubelet). Under ``PYTHONUNBUFFERED=1`` or ``python -u`` each ``print`` is two
writes, text then newline, so two procs printing at once interleave inside a line. Monarch
forwards whole lines; so do we: each stream is re-opened line-buffered over a buffered writer,
so a line of up to a pipe's atomic size (4 KiB) reaches the descriptor in one write.
"""

from __future__ import annotations

import io
import sys


def _line_buffered(fd: int, like: io.TextIOBase) -> io.TextIOWrapper:
    encoding = getattr(like, "encoding", None) or "utf-8"
    errors = getattr(like, "errors", None) or "backslashreplace"
    binary = open(fd, "wb", closefd=False)  # a BufferedWriter: the line goes out in one write
    return io.TextIOWrapper(binary, encoding=encoding, errors=errors, line_buffering=True)


def write_whole_lines(*, flush: bool = True) -> None:
    """Re-open fd 1 and fd 2 as line-buffered text streams (in a proc server process only: the
    controller's own streams are never touched). ``flush=False`` in a child forked by the zygote:
    what its inherited buffers hold is the zygote's, not this proc's."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        current = getattr(sys, name)
        if current is not None:
            if flush:
                current.flush()
            setattr(sys, name, _line_buffered(fd, current))
