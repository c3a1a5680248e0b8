"""``procmesh logs``: every selected proc's output, interleaved line by line with a rank prefix.

One log stream per pod, each read by its own thread, so a mesh of any size is followed at once
(``kubectl logs -l ... -f`` stops at five: "maximum allowed concurrency is 5"). Lines are
written whole, under one lock, so two procs never mix within a line
(:mod:`mesh_client._src.kubernetes.logstreams`); :mod:`.commands` picks the pods, and with
``-f`` :mod:`.following` gives each proc's next stream once its proc restarts.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from mesh_client._src.kubernetes import logstreams
from mesh_client._src.kubernetes.errors import KubernetesMeshError
from mesh_client._src.runtime import exiting


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


#: After a followed stream ends: the opener of the proc's next stream (its new pod's), or None
#: when there is none to follow (said on stderr by whoever returns it).
Reopen = Callable[[Callable[[], bool]], "Callable[[], Any] | None"]


class Pumps:
    """Copies streams into one :class:`logstreams.Interleaver`; errors end one stream only."""

    def __init__(self, out: TextIO) -> None:
        self.sink = logstreams.Interleaver(out)
        self.errors: list[str] = []
        self.streams = logstreams.OpenStreams()
        self.closed: BrokenPipeError | None = None  # our output's reader left (``| head``)

    def stopped(self) -> bool:
        return self.streams.stopped

    def pump(self, prefix: str, open_stream: Callable[[], Any], reopen: Reopen | None = None) -> None:
        """Copy one proc's stream; with ``reopen`` (``-f``), then each next one it gives: a
        restarted proc is a new pod of the same name, whose log is a new stream."""
        opener: Callable[[], Any] | None = open_stream
        unopened: list[str] = []  # this proc's streams that could not be opened, since its last one
        while opener is not None:
            opened = False
            try:
                response = opener()
                opened = True
                self.forgive(unopened)
                self.streams.add(response)
                try:
                    for line in logstreams.response_lines(response):
                        self.write(prefix, line)
                finally:
                    self.streams.discard(response)
                    response.release_conn()
            except KubernetesMeshError as exc:
                self.failed(str(exc), None if opened else unopened)
            except Exception as exc:  # a broken stream of one pod must not end the others
                self.failed(f"{prefix.strip()} log stream ended: {exc}", None if opened else unopened)
            if reopen is None or self.stopped():
                return
            opener = reopen(self.stopped)


    def write(self, prefix: str, line: str) -> None:
        """One line out; when nothing reads our output any more, every stream is stopped: the
        others' lines could go nowhere, and a followed proc would be waited on forever."""
        try:
            self.sink.write(prefix, line)
        except BrokenPipeError as exc:
            self.closed = exc
            self.streams.stop()
            raise

    def failed(self, error: str, unopened: list[str] | None = None) -> None:
        """``error`` ends the command with status 1; ``unopened``: the proc's list it goes in too
        when its stream could not be opened at all (nothing read)."""
        if not self.stopped():  # a stream we ended ourselves is no error
            self.errors.append(error)
            if unopened is not None:
                unopened.append(error)

    def forgive(self, unopened: list[str]) -> None:
        """A proc's stream opened after others of it could not be (-f: its pod was missing or
        Pending, and is followed from its start now): nothing of it was left out, so those
        failures fail the command no more (a -f that ended by itself exited 1 saying the pod
        did not exist, after printing its log)."""
        for error in unopened:
            self.errors.remove(error)  # an equal one of another proc says the same: either goes
        unopened.clear()


def follow_all(streams: Sequence[tuple[str, Callable[[], Any], Reopen | None]],
               out: TextIO = sys.stdout) -> list[str]:
    """Run every stream (and those its ``reopen`` gives) on its own thread until all end (or
    Ctrl-C); returns their errors. BrokenPipeError once ``out``'s reader has gone."""
    pumps = Pumps(out)
    threads = [threading.Thread(target=pumps.pump, args=(prefix, opener, reopen), daemon=True,
                                name=f"logs {prefix.strip()}") for prefix, opener, reopen in streams]
    for thread in threads:
        exiting.track(thread, pumps.streams.stop)  # a Ctrl-C exit: no pump is left inside TLS (runtime/exiting.py)
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)  # short joins keep the main thread responsive to Ctrl-C
    if pumps.closed is not None:
        raise pumps.closed
    return pumps.errors
