"""A proc's stdout and stderr write whole lines, and on the local backend name their proc.

The procs of a local mesh share the controller's terminal (and a pod's two streams are read line
by line by the kubelet). Under ``PYTHONUNBUFFERED=1`` or ``python -u`` each ``print`` is two
writes, text then newline, so two procs printing at once interleave inside a line. Monarch
forwards whole lines; so do we: each stream is re-opened line-buffered over a buffered writer,
so a line of up to a pipe's atomic size (4 KiB) reaches the descriptor in one write.

Which proc printed a line: on Kubernetes the controller prefixes each line it reads from a pod's
log (:mod:`mesh_client._src.kubernetes.output`); a local proc writes straight to the controller's
terminal, so the proc itself puts the same prefix, ``[<mesh> rank <r>] ``, before each line it
writes through ``sys.stdout``/``sys.stderr``, when the local launcher sets :data:`PREFIX_ENV`
(:mod:`mesh_client._src.local.launcher`; pods never get it, so ``kubectl logs`` stays bare).
What bypasses Python's streams (a C library writing to fd 1, a subprocess) is not prefixed.
Both backends obey one switch, :func:`forwarding_enabled`.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from typing import Any

#: ``0`` (or ``false``, ``no``, ``off``) in the controller's environment: no proc output is
#: forwarded from pods, and local procs' lines carry no prefix.
FORWARD_ENV = "PROCMESH_FORWARD_OUTPUT"
#: Set by the local launcher in a proc's environment: the prefix of each line it writes.
PREFIX_ENV = "PROCMESH_OUTPUT_PREFIX"


def forwarding_enabled(choice: bool | None, environ: Mapping[str, str] = os.environ) -> bool:
    """The caller's choice (``forward_output=``), else the environment's (on unless
    ``PROCMESH_FORWARD_OUTPUT=0``)."""
    if choice is not None:
        return choice
    return environ.get(FORWARD_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def proc_prefix(mesh: str, rank: int) -> str:
    """The prefix naming a proc before each line of its output, on both backends."""
    return f"[{mesh} rank {rank}] "


class _PrefixedLines(io.RawIOBase):
    """A raw writer to ``fd`` that puts ``prefix`` at the start of every line; under a
    BufferedWriter each flush (a line, with line buffering) becomes one ``os.write``."""

    def __init__(self, fd: int, prefix: bytes) -> None:
        super().__init__()
        self._fd = fd
        self.prefix = prefix
        self._at_line_start = True

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: Any, /) -> int:  # any buffer (collections.abc.Buffer from 3.12)
        chunk = bytes(data)
        if not chunk:
            return 0
        out = bytearray()
        for line in chunk.splitlines(keepends=True):
            if self._at_line_start:
                out += self.prefix
            out += line
            self._at_line_start = line.endswith(b"\n")
        view = memoryview(bytes(out))
        while view:
            view = view[os.write(self._fd, view):]
        return len(chunk)


def _line_buffered(fd: int, like: io.TextIOBase, prefix: str | None) -> io.TextIOWrapper:
    encoding = getattr(like, "encoding", None) or "utf-8"
    errors = getattr(like, "errors", None) or "backslashreplace"
    # Always a _PrefixedLines (with an empty prefix for bare lines), so that set_prefix can
    # change the prefix in place, also for handlers that hold the stream (logging's).
    binary = io.BufferedWriter(_PrefixedLines(fd, (prefix or "").encode(encoding, errors)))
    return io.TextIOWrapper(binary, encoding=encoding, errors=errors, line_buffering=True)


def write_whole_lines(*, flush: bool = True, prefix: str | None = None) -> None:
    """Re-open fd 1 and fd 2 as line-buffered text streams (in a proc server process only: the
    controller's own streams are never touched), each line led by ``prefix`` (default: the
    environment's :data:`PREFIX_ENV`, if any). ``flush=False`` in a child forked by the zygote:
    what its inherited buffers hold is the zygote's, not this proc's."""
    prefix = os.environ.get(PREFIX_ENV) if prefix is None else prefix
    for name, fd in (("stdout", 1), ("stderr", 2)):
        current = getattr(sys, name)
        if current is not None:
            if flush:
                current.flush()
            setattr(sys, name, _line_buffered(fd, current, prefix))


def set_prefix(prefix: str) -> None:
    """Lead each line this proc writes from now on with ``prefix`` (``""``: bare lines), on the
    streams :func:`write_whole_lines` made, changed in place (ProcMesh.logging_option)."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        current = getattr(sys, name)
        if current is None:
            continue
        current.flush()
        raw = getattr(getattr(current, "buffer", None), "raw", None)
        if isinstance(raw, _PrefixedLines):
            raw.prefix = prefix.encode(current.encoding or "utf-8", current.errors or "backslashreplace")
        else:
            setattr(sys, name, _line_buffered(fd, current, prefix))
