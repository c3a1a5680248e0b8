"""A mesh's lifetime follows the program that created it, as local procs die with theirs.

Two ties, both set by :meth:`KubernetesHostMesh.spawn_procs` unless it is told ``outlive=True``:

- **In a pod**: an owner reference from the mesh to the controller's pod (named by the
  ``POD_NAME`` and ``POD_UID`` environment, which the downward API provides), so garbage
  collection deletes the mesh when that pod goes.
- **Everywhere**: ``spec.lease``. :class:`LeaseRenewer` writes the annotation
  ``procmesh.io/lease-renew-time`` every third of the lease from a daemon thread; the operator
  (``procmesh_operator.leases``) deletes the mesh once a lease passes without one. SIGKILL, a
  crash or a lost laptop all stop the renewals; a normal exit deletes the mesh at once (atexit),
  and so does SIGTERM (:mod:`.terminating`, through :func:`delete_owned`).
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes.errors import KubernetesMeshError, MeshAccessDenied, MeshNotFound
from mesh_client._src.runtime import exiting

#: The lease of spawned meshes unless the host mesh is given another: long enough for a
#: controller's GC pause or an API server restart, short enough to free GPUs soon.
DEFAULT_LEASE_SECONDS = 30
#: A renewal that failed is tried again this soon (seconds), not a period later.
RETRY_SECONDS = 1.0
POD_NAME_ENV = "POD_NAME"
POD_UID_ENV = "POD_UID"
POD_NAMESPACE_ENV = "POD_NAMESPACE"


def creator_pod_owner(mesh_namespace: str, environ: Mapping[str, str],
                      pod_namespace: str | None) -> dict[str, Any] | None:
    """The owner reference to this process's pod, if it runs in one of ``mesh_namespace``
    (owner references do not cross namespaces) and the downward API told it who it is."""
    name, uid = environ.get(POD_NAME_ENV), environ.get(POD_UID_ENV)
    namespace = environ.get(POD_NAMESPACE_ENV) or pod_namespace
    if not name or not uid or namespace != mesh_namespace:
        return None
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def delete_owned(seconds: float) -> None:
    """Delete every mesh this process still owns, all at once, waiting ``seconds`` at most in
    all (the process is about to die: best effort, a mesh not deleted goes when its lease lapses).
    A forked child (a multiprocessing worker ended with SIGTERM) owns none of its parent's."""
    with _owned_lock:
        renewers = [r for r, pid in _owned.items() if pid == os.getpid()]
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=r.delete_now, args=(seconds,), name=f"procmesh delete {r.name}", daemon=True)
               for r in renewers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


class LeaseRenewer:
    """Renews one mesh's lease until :meth:`stop`; deletes the mesh if the program exits first."""

    def __init__(self, api: api_mod.KubeApi, name: str, seconds: float, uid: str | None = None) -> None:
        self.api = api
        self.name = name
        self.uid = uid  # the mesh made: one made since under its name is never renewed nor deleted
        self.period = max(1.0, seconds / 3)
        self._stopped = threading.Event()  # the renewing thread ends (also told at exit: runtime/exiting.py)
        self._thread = threading.Thread(target=self._run, name=f"procmesh lease {name}", daemon=True)

    def start(self) -> None:
        """Renew once now, so a client that may not is told at spawn (not by a deleted mesh
        half a minute later), then keep renewing in the background."""
        try:
            self.api.renew_lease(self.name, now_rfc3339(), uid=self.uid)
        except MeshAccessDenied as exc:
            raise MeshAccessDenied(
                f"{exc}. A mesh spawned from Python holds a lease it renews by patching the mesh "
                f"(the chart's client role grants 'patch' on procmeshes); or spawn it with "
                f"outlive=True, and delete it yourself") from None
        atexit.register(self._at_exit)
        with _owned_lock:
            _owned[self] = os.getpid()
        exiting.track(self._thread, self._stopped.set)  # never in a renewal when the interpreter ends
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        atexit.unregister(self._at_exit)
        with _owned_lock:
            _owned.pop(self, None)

    def _run(self) -> None:
        failing = False
        due = time.monotonic() + self.period  # from the last renewal that went through
        while not self._stopped.wait(max(0.0, due - time.monotonic())):
            try:
                # Each try bounded by a third of the period (its connect tried three times in
                # all), and a failed one tried again a second later, not a period later: the
                # lease (three periods) is renewed in time after a short outage.
                self.api.renew_lease(self.name, now_rfc3339(), timeout=self.period / 3, uid=self.uid)
                failing = False
                due = time.monotonic() + self.period
            except MeshNotFound:
                return
            except (KubernetesMeshError, OSError) as exc:  # retried; said once per streak
                if not failing:
                    print(f"procmesh: cannot renew the lease of ProcMesh {self.api.namespace}/{self.name} "
                          f"(retrying; the operator deletes it if this lasts): {exc}", file=sys.stderr)
                failing = True
                due = time.monotonic() + min(RETRY_SECONDS, self.period)

    def _at_exit(self) -> None:
        """Registered only until :meth:`stop`: the program exits with its mesh still running.
        (Whether the renewals were already halted at exit does not matter here.)"""
        self._stopped.set()
        try:
            self.api.delete_mesh(self.name, uid=self.uid)
        except Exception:
            pass  # the lease lapses and the operator deletes it

    def delete_now(self, timeout: float) -> None:
        """Stop renewing and delete the mesh, waiting ``timeout`` at most (:func:`delete_owned`)."""
        self._stopped.set()
        try:
            self.api.delete_mesh(self.name, timeout=timeout, uid=self.uid)
        except Exception as exc:
            print(f"procmesh: could not delete ProcMesh {self.api.namespace}/{self.name} as this program ends "
                  f"({exc}); the operator deletes it when its lease lapses", file=sys.stderr, flush=True)


# The meshes this process owns (their renewers, until stopped, and the pid that started them:
# a forked child inherits the dict, not the meshes), for SIGTERM's handler. Reentrant: that
# handler runs on the main thread, which may hold the lock in start() or stop() as it comes.
_owned: dict[LeaseRenewer, int] = {}
_owned_lock = threading.RLock()
