"""The operator's own watch of the Kueue Workloads of meshes (:mod:`.listwatch`, label
``procmesh.io/mesh``), each event handed to the controller's ``workload_event``.

kopf's watch of Workloads ended the whole operator process when Kueue's Workload CRD was
deleted under it (Kueue uninstalled, or its CRDs replaced by an upgrade): its list or watch
answered 404, which kopf raises out of its task set (within ten installs and deletions in each
of four runs here). This watch takes a 404 as "Kueue is not installed (now)": said once, then looked for
again at each pause of :mod:`.listwatch`, so it starts watching when Kueue comes, within 30 s.
Started by :mod:`.handlers` where the operator watches pods itself (:mod:`.podwatch`), over the
same namespaces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import kubeclient, listwatch, workloads

WorkloadEvent = Callable[[Mapping[str, Any]], None]


def path(namespace: str | None) -> str:
    """Where Workloads are listed: in ``namespace``, or every namespace (None)."""
    if namespace is None:
        return f"/apis/{workloads.GROUP}/{workloads.VERSION}/{workloads.PLURAL}"
    return workloads.workloads_path(namespace)


def _labels_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller reads of a Workload event: which mesh it belongs to."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "labels")
                         if k in meta}}


def start(client: kubeclient.KubeClient, namespace: str | None,
          event: WorkloadEvent) -> listwatch.ListWatch:
    """A running watch of the meshes' Workloads in ``namespace`` (None: every namespace)."""
    watch = listwatch.ListWatch(client, path(namespace), contract.MESH_LABEL, _labels_only,
                                lambda _type, body: event(body), optional=True)
    watch.start()
    return watch
