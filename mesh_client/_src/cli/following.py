"""``procmesh logs -f`` across proc restarts: a restarted proc is a new pod of the same name (its
pods have restartPolicy Never), so its log is a new stream, which the old one never leads to.

:class:`ProcFollower` is a proc's ``reopen`` for :class:`.logs.Pumps`: when its stream ends it
says so on stderr, waits for the proc's new pod to start, and gives the opener of that pod's log;
it gives None (said why) when no new pod will come: the mesh is gone, or its restartPolicy is
Never and the proc has ended. A proc whose pod is missing or Pending when ``-f`` begins is
followed once that pod runs (:meth:`ProcFollower.first`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from mesh_client._src import contract
from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes.errors import KubernetesMeshError, MeshNotFound

#: How often a proc whose stream ended is looked at again, for its new pod.
RECHECK_SECONDS = 1.0


def _uid(pod: Mapping[str, Any] | None) -> str | None:
    return str((pod or {}).get("metadata", {}).get("uid") or "") or None


def _started(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's container has started, so that its log can be read."""
    return any((cs.get("state") or {}).get("running") or (cs.get("state") or {}).get("terminated")
               for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class ProcFollower:
    """The next log stream of one proc of ``mesh`` (see the module's docstring)."""

    def __init__(self, api: api_mod.KubeApi, mesh: Mapping[str, Any], rank: int, pod: str,
                 open_log: Callable[[str], Any], err: TextIO | None = None) -> None:
        self.api, self.rank, self.pod, self.open_log = api, rank, pod, open_log
        self.mesh = str(mesh["metadata"]["name"])
        self.never = (mesh.get("spec") or {}).get("restartPolicy") == contract.RESTART_NEVER
        self.err = err or sys.stderr
        self.uid: str | None = None  # the pod whose log is followed (None: not known; "": none yet)
        self.unstarted = False  # "": its pod exists, and had not started when its log was asked for

    def first(self, open_stream: Callable[[], Any]) -> Callable[[], Any]:
        """``open_stream`` (the first stream), noting the pod it reads first; on the pump's
        thread, so that a mesh of thousands of procs starts all its streams at once."""
        def opened() -> Any:
            found = self.api.pod(self.pod)
            # Refused ({}): None, restarts not followed. Not there (deleted, not created yet):
            # "", so that the pod which comes is followed (was: 'this client may not get pods').
            self.uid = "" if found is None else _uid(found)
            if found and self.uid and not _started(found):
                # Pending: no log yet (the API server answers an unscheduled pod's with an empty
                # stream, which ended at once). "", so that this pod is followed once it runs:
                # it waited for a new pod instead, and none came until the proc restarted.
                self.uid, self.unstarted = "", True
                raise KubernetesMeshError(
                    f"pod {self.api.namespace}/{self.pod} had not started, so its proc had no log yet: "
                    f"'procmesh describe' shows the mesh's procs and why")
            return open_stream()
        return opened

    def say(self, text: str) -> None:
        print(f"procmesh logs: rank {self.rank}: {text}", file=self.err, flush=True)

    def __call__(self, stopped: Callable[[], bool]) -> Callable[[], Any] | None:
        if self.uid is None:
            self.say(f"the log stream of pod {self.pod} ended; its restarts are not followed "
                     f"(this client may not get pods)")
            return None
        if self.uid:
            self.say(f"the log stream of pod {self.pod} ended; following its proc's new pod when it restarts")
        elif self.unstarted:
            self.say(f"pod {self.pod} has not started yet; following it once it runs")
        else:
            self.say(f"pod {self.pod} does not exist now; following it once it is created and runs")
        while not stopped():
            try:
                pod = self.api.pod(self.pod)
                if pod is None:
                    self.api.get_mesh(self.mesh)  # MeshNotFound: no new pod will come
                elif _uid(pod) != self.uid and _started(pod):
                    self.say(f"pod {self.pod} is new (its proc restarted): following its log" if self.uid
                             else f"pod {self.pod} runs now: following its log")
                    self.uid = _uid(pod)
                    return lambda: self.open_log(self.pod)
                elif _uid(pod) == self.uid and self.never and _ended(pod):
                    self.say(f"pod {self.pod} ended and the mesh's restartPolicy is Never: no new pod comes")
                    return None
            except MeshNotFound:
                self.say(f"ProcMesh {self.api.namespace}/{self.mesh} is gone: no new pod comes")
                return None
            except KubernetesMeshError as exc:
                self.say(f"no longer followed: {exc}")
                return None
            deadline = time.monotonic() + RECHECK_SECONDS
            while time.monotonic() < deadline and not stopped():
                time.sleep(0.1)
        return None
