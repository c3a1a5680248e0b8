"""The operator's own watch of proc pods (:mod:`.listwatch` with label ``procmesh.io/mesh``),
each event projected (:func:`projections.slim_pod`) as it is decoded and handed to the
controller.

kopf would handle every pod event as an object of its own: a worker task per pod, its handler
machinery per event, and the whole decoded pod held by each idle worker for seconds after its
last event. At thousands of pods starting at once that was a sixth of the operator's CPU and
most of its peak memory (benchmarks/results/scale.md, third pass). Here an event costs its JSON
decoding, the projection and :meth:`reconciling.Controller.pod_event`; nothing of it outlives
the call but the slim pod the store keeps. A deletion missed across a relist is repaired by
that list (:meth:`PodStore.repair`, through the controller's
:meth:`~procmesh_operator.reconciling.Controller.pods_listed`).
One :class:`PodWatch` per path: ``/api/v1/pods`` for every namespace, else one per namespace.
:mod:`.__main__` falls back to kopf's watch for namespace globs, and with peering (kopf pauses
its watches while another replica is active; nothing would pause this one). Started by
:mod:`.handlers`.
"""

from __future__ import annotations

from mesh_client._src import contract
from procmesh_operator import kubeclient, listwatch, projections


def all_namespaces_path() -> str:
    return "/api/v1/pods"


class PodWatch(listwatch.ListWatch):
    """Lists and watches the proc pods under ``path`` for as long as it runs."""

    def __init__(self, client: kubeclient.KubeClient, path: str, deliver: listwatch.Deliver,
                 listed: listwatch.Listed | None = None) -> None:
        super().__init__(client, path, contract.MESH_LABEL, projections.slim_pod, deliver, listed)
