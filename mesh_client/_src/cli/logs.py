"""``procmesh logs``: every selected proc's output, interleaved line by line with a rank prefix.

One log stream per pod, each read by its own thread, so a mesh of any size is followed at once
(``kubectl logs -l ... -f`` stops at five: "maximum allowed concurrency is 5"). Lines are
written whole, under one lock, so two procs never mix within a line. Streams come from
:meth:`mesh_client._src.kubernetes.api.KubeApi.pod_log`; :mod:`.commands` picks the pods.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from mesh_client._src.kubernetes.errors import KubernetesMeshError

CHUNK = 8192


def select(procs: Sequence[Mapping[str, Any]], ranks: Sequence[int] | None,
           coords: Mapping[str, int] | None) -> list[Mapping[str, Any]]:
    """The procs of ``status.procs`` at these ranks and matching these coordinates (a partial
    point selects a slice: ``hosts=1`` is every proc of host 1); all procs when neither is set."""
    chosen = []
    for proc in sorted(procs, key=lambda p: p.get("rank", 0)):
        if ranks and proc.get("rank") not in ranks:
            continue
        point = proc.get("coords") or {}
        if coords and any(point.get(k) != v for k, v in coords.items()):
            continue
        chosen.append(proc)
    return chosen


def parse_coords(text: str) -> dict[str, int]:
    """``hosts=0,gpus=1`` -> {"hosts": 0, "gpus": 1}; ValueError naming the bad part."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--coords {text!r}: {part!r} is not DIM=INDEX (as in hosts=0,gpus=1)")
        out[key.strip()] = int(value)
    return out


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


class Interleaver:
    """Writes lines of many streams to one output, each whole and prefixed."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.errors: list[str] = []

    def write(self, prefix: str, line: str) -> None:
        with self.lock:
            self.out.write(f"{prefix}{line}\n")
            self.out.flush()

    def pump(self, prefix: str, open_stream: Callable[[], Any]) -> None:
        """Copy one stream; an error ends this stream only, and is reported at the end."""
        try:
            response = open_stream()
            try:
                for line in lines_of(response.stream(CHUNK, decode_content=False)):
                    self.write(prefix, line)
            finally:
                response.release_conn()
        except KubernetesMeshError as exc:
            self.errors.append(str(exc))
        except Exception as exc:  # a broken stream of one pod must not end the others
            self.errors.append(f"{prefix.strip()} log stream ended: {exc}")


def follow_all(streams: Sequence[tuple[str, Callable[[], Any]]], out: TextIO = sys.stdout) -> list[str]:
    """Run every stream on its own thread until all end (or Ctrl-C); returns their errors."""
    sink = Interleaver(out)
    threads = [threading.Thread(target=sink.pump, args=(prefix, opener), daemon=True,
                                name=f"logs {prefix.strip()}") for prefix, opener in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)  # short joins keep the main thread responsive to Ctrl-C
    return sink.errors
