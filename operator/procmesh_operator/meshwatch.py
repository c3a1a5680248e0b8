"""The operator's own watch of ProcMeshes (:mod:`.listwatch`, every mesh under one path), each
event handed to the controller as kopf's ``on.event`` handler would hand it.

kopf watches a custom resource only while its API discovery lists it, and looks again only when
a CustomResourceDefinition changes: the CRD deleted and created again (an uninstall with
``crds.keep=false`` and a new install, a restore), the last of its events (the CRD turning
Established) races the API server's own discovery update, and when kopf's look comes first it
finds no ``procmeshes`` and stops watching them for good, no later CRD event coming to correct
it: the operator stayed live and Ready and never saw a new mesh (within the first three rounds
of delete and create in each of three runs here). And a kopf list of the resource answered 404
(the CRD deleted under it) ended the whole operator process. This watch lists the path again
after any failure (a 404 while the CRD is gone included), with the pause of :mod:`.listwatch`,
so it comes back by itself once the resource is served. A mesh deleted while no watch ran is absent from the next list (the controller's
:meth:`~procmesh_operator.reconciling.Controller.meshes_listed`). Started by :mod:`.handlers`
where the operator watches pods itself (:mod:`.podwatch`), over the same namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import kubeclient, listwatch


def path(namespace: str | None) -> str:
    """Where meshes are listed: in ``namespace``, or every namespace (None)."""
    if namespace is None:
        return f"/apis/{contract.GROUP}/{contract.VERSION}/{contract.PLURAL}"
    return kubeclient.mesh_path(namespace)


def _whole(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Meshes are kept whole (the reconcile reads spec, metadata and status)."""
    return dict(obj)


class MeshWatch(listwatch.ListWatch):
    """Lists and watches every ProcMesh in ``namespace`` (None: all) for as long as it runs."""

    def __init__(self, client: kubeclient.KubeClient, namespace: str | None,
                 deliver: listwatch.Deliver, listed: listwatch.Listed | None = None) -> None:
        super().__init__(client, path(namespace), "", _whole, deliver, listed)
