"""What the procs print shows in the controller's terminal, as Monarch does: each line of each
proc pod's log on this program's stdout, prefixed ``[<mesh> rank <r>] ``.

On by default for every mesh attached or spawned (``forward_output=False``, or the environment
``PROCMESH_FORWARD_OUTPUT=0``, switches it off). One thread per pod follows its log through the
API server (``pods/log``; without that right, one note says so and nothing else changes).

No line is lost or repeated across the attach: before :meth:`OutputForwarder.start` returns,
each thread has counted the lines its pod's current run had written, and its follow stream skips
exactly those. A stream that ends (the proc restarted, the connection dropped) is opened again;
the same run (pod uid and restart count unchanged) skips what was already shown, a new run is
shown from its start. :meth:`OutputForwarder.stop` reads each log once more, so what a proc
printed before the controller stopped its mesh is shown even when its stream lagged; so does a
program's exit with its mesh still running.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes import logstreams, transport
from mesh_client._src.kubernetes.errors import MeshAccessDenied
from mesh_client._src.runtime import exiting
from mesh_client._src.server import output as proc_output

ENV = proc_output.FORWARD_ENV  # one switch for both backends
#: How long start() waits for every pod's line count (a slow API server must not hang attach).
READY_TIMEOUT = 10.0
REOPEN_SECONDS = 1.0
#: A pod missing this long (its mesh deleted under us) ends its thread.
GIVE_UP_SECONDS = 120.0
#: How long :meth:`OutputForwarder.stop` waits for the following threads to end, all together.
STOP_JOIN_SECONDS = 2.0
#: The most :meth:`OutputForwarder.stop`'s last read of every log may take (an API server out of
#: reach must not hold a program's exit for a request timeout per pod).
CATCH_UP_SECONDS = 10.0


def enabled(forward_output: bool | None) -> bool:
    """The caller's choice, else the environment's (on unless ``PROCMESH_FORWARD_OUTPUT=0``)."""
    return proc_output.forwarding_enabled(forward_output, os.environ)


class OutputForwarder:
    """Follows the logs of one mesh's pods (by rank) until :meth:`stop`."""

    def __init__(self, api: api_mod.KubeApi, mesh: str, pods: Sequence[str], out: TextIO | None = None) -> None:
        self.api = api
        self.mesh = mesh
        self.pods = list(pods)
        self.sink = logstreams.Interleaver(out or sys.stdout)
        self._stopped = threading.Event()
        self._streams = logstreams.OpenStreams()
        self._denied = threading.Event()
        self._denied_once = threading.Lock()  # one note, though every pod's thread is refused at once
        self._counted = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._progress: dict[int, tuple[tuple[str, int] | None, int]] = {}  # rank -> (run, lines shown)

    def start(self) -> None:
        for rank, pod in enumerate(self.pods):
            thread = threading.Thread(target=self._follow, args=(rank, pod), daemon=True,
                                      name=f"procmesh output {self.mesh}[{rank}]")
            self._threads.append(thread)
            # A program that exits with its mesh attached, or while a stopped thread is still in
            # an API call: the thread ends before the interpreter does (runtime/exiting.py).
            exiting.track(thread, self._tell_stop)
            thread.start()
        for _ in self.pods:  # every pod's lines so far are counted, so none printed later is lost
            if not self._counted.acquire(timeout=READY_TIMEOUT):
                break
        # A program that exits without stopping its mesh: the last lines are read then too.
        # Registered after the mesh's lease (lifetimes.py), so it runs before the lease's exit
        # handler deletes the mesh and its pods' logs with it.
        atexit.register(self.stop)

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self._stopped.is_set() and not any(thread.is_alive() for thread in self._threads):
            return  # stopped already (the mesh's stop, then the program's exit)
        self._tell_stop()
        ends = time.monotonic() + STOP_JOIN_SECONDS  # one wait for all (a thread still asking for its stream cannot be cut short)
        for thread in self._threads:
            thread.join(timeout=max(0.0, ends - time.monotonic()))
        self._catch_up()

    def _tell_stop(self) -> None:
        """Every thread ends soon: the streams they read are shut down, and one that opens a
        stream after this shuts it down itself (:meth:`_follow`)."""
        self._stopped.set()
        self._streams.stop()

    def _catch_up(self) -> None:
        """Show what each proc wrote that its stream had not delivered yet (streams lag), so
        everything printed before ``stop()`` is seen: one plain read per pod, same run only,
        all within :data:`CATCH_UP_SECONDS`; a pod whose read fails (throttled, say) is skipped,
        not the pods after it."""
        if self._denied.is_set():
            return
        deadline = time.monotonic() + CATCH_UP_SECONDS
        for rank, pod in enumerate(self.pods):
            if time.monotonic() >= deadline:
                left = len(self.pods) - rank
                print(f"procmesh: the last lines of {left} of ProcMesh {self.api.namespace}/{self.mesh}'s procs (from "
                      f"rank {rank}) may not have been shown: reading their logs took over {CATCH_UP_SECONDS:g} s "
                      f"('procmesh logs {self.mesh} -n {self.api.namespace}' shows them)", file=sys.stderr)
                return
            run, shown = self._progress.get(rank, (None, 0))
            try:
                if run is None or self._run_of(pod, transport.time_left(deadline)) != run:
                    continue
                response = self.api.pod_log(pod, timeout=transport.time_left(deadline))
                try:
                    lines = list(logstreams.response_lines(response))
                finally:
                    response.release_conn()
            except Exception:
                continue
            for line in lines[shown:]:
                self.sink.write(proc_output.proc_prefix(self.mesh, rank), line)

    # --- one pod -------------------------------------------------------------------------------

    def _run_of(self, pod: str, timeout: float | None = None) -> tuple[str, int] | None:
        """(uid, restarts) of the pod's current run; None when it is gone; ("", 0) unknown."""
        body = self.api.pod(pod, timeout)
        if body is None:
            return None
        meta, status = body.get("metadata") or {}, body.get("status") or {}
        restarts = sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or [])
        return str(meta.get("uid", "")), restarts

    def _count_lines(self, pod: str) -> int:
        response = self.api.pod_log(pod)
        try:
            return sum(1 for _ in logstreams.response_lines(response))
        finally:
            response.release_conn()

    def _follow(self, rank: int, pod: str) -> None:
        prefix = proc_output.proc_prefix(self.mesh, rank)
        run: tuple[str, int] | None = None
        shown = 0
        try:
            run, shown = self._run_of(pod), self._count_lines(pod)
        except MeshAccessDenied as exc:
            self._note_denied(exc)
            return
        except Exception:
            pass  # counted as nothing shown yet; the stream below may repeat a little
        finally:
            self._progress[rank] = (run, shown)
            self._counted.release()
        missing_since: float | None = None
        while not self._stopped.is_set():
            try:
                response = self.api.pod_log(pod, follow=True)
            except MeshAccessDenied as exc:
                self._note_denied(exc)
                return
            except Exception:
                response = None
            if response is not None:
                missing_since = None
                self._streams.add(response)  # shut down at once if _tell_stop came first
                try:
                    for index, line in enumerate(logstreams.response_lines(response)):
                        if self._stopped.is_set():
                            return
                        if index >= shown:
                            self.sink.write(prefix, line)
                            shown = index + 1
                            self._progress[rank] = (run, shown)
                except Exception:
                    pass  # a dropped stream: opened again below
                finally:
                    self._streams.discard(response)
            if self._stopped.wait(REOPEN_SECONDS):
                return
            try:
                now_run = self._run_of(pod)
            except Exception:
                now_run = run
            if now_run is None:
                missing_since = missing_since or time.monotonic()
                if time.monotonic() - missing_since > GIVE_UP_SECONDS:
                    return
                continue
            if now_run != run and now_run != ("", 0):
                run, shown = now_run, 0  # a new run of the proc: its output from the start
                self._progress[rank] = (run, shown)

    def _note_denied(self, exc: MeshAccessDenied) -> None:
        if self._denied_once.acquire(blocking=False):  # never released: the first thread alone says it
            self._denied.set()
            print(f"procmesh: not showing the output of ProcMesh {self.api.namespace}/{self.mesh}'s procs: "
                  f"{exc} (forward_output=False, or {ENV}=0, turns this off)", file=sys.stderr)

