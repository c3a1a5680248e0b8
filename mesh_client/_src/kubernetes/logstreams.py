"""Pod log streams as lines: cut whole from chunks, written whole under one lock with a prefix.

Shared by ``procmesh logs`` (:mod:`mesh_client._src.cli.logs`) and the client's forwarding of
proc output (:mod:`.output`). Streams come from :meth:`.api.KubeApi.pod_log`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from typing import Any, TextIO

CHUNK = 8192


def lines_of(chunks: Iterable[bytes]) -> Iterable[str]:
    """Whole lines from a byte stream cut anywhere (a last unterminated line is kept too)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def response_lines(response: Any) -> Iterable[str]:
    """The lines of a streaming log response (``_preload_content=False``)."""
    return lines_of(response.stream(CHUNK, decode_content=False))


class OpenStreams:
    """The log streams being read by threads that :meth:`stop` ends: it shuts every open one
    down, and one opened after it is shut down as it is added, so no reader is left waiting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[Any] = set()
        self.stopped = False

    def add(self, response: Any) -> None:
        with self._lock:  # ordered with stop()
            self._open.add(response)
            stopped = self.stopped
        if stopped:
            interrupt(response)

    def discard(self, response: Any) -> None:
        with self._lock:
            self._open.discard(response)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            responses, self._open = list(self._open), set()
        for response in responses:
            interrupt(response)


def interrupt(response: Any) -> None:
    """Wake the thread reading ``response``: shut its socket down (``close()`` from another
    thread would wait for the reader's lock, which an idle log stream holds forever)."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Interleaver:
    """Writes lines of many streams to one output, each whole and prefixed."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def write(self, prefix: str, line: str) -> None:
        with self.lock:
            self.out.write(f"{prefix}{line}\n")
            self.out.flush()
