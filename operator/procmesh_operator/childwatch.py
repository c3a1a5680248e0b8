"""The operator's watch of the children it keeps for each mesh that nothing else recreates: the
headless Service and the access Role (:mod:`.listwatch`, selected by the labels every child
carries, :func:`names.mesh_labels`).

A Service or Role deleted under a running mesh was noticed only when a proc was replaced or at
the periodic child check (every ``CHILD_CHECK_RESYNCS`` resyncs, about 5 minutes): meanwhile the
procs' DNS names were gone and everyone bound to the access Role was refused. With this watch
the deletion itself reconciles the mesh, which creates the child again (and says so in a
Warning event), as a Deployment's controller does for its ReplicaSet. A deletion missed while
no watch ran shows as the child's absence from the next list. The PodGroup is left to the
periodic check: it matters only when pods are created, which checks it anyway.
Only objects carrying our labels are listed and watched (server-side), so the cluster's other
Services and Roles cost nothing. Started with the pod watch, over the same namespaces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from mesh_client._src import contract
from procmesh_operator import kubeclient, listwatch

#: Both labels: a user's own Service that carries the mesh label (to select its pods) is not ours.
SELECTOR = f"{contract.MESH_LABEL},{contract.MANAGED_BY_LABEL}={contract.MANAGED_BY}"
#: The watched kinds, by the name the reconcile gives them (reconciling.CHILD_KINDS).
SERVICE, ROLE = "Service", "Role"

ChildEvent = Callable[[str, str | None, dict[str, Any]], None]
#: (kind, namespace or None, the listed children, the list's resourceVersion)
ChildrenListed = Callable[[str, str | None, list[dict[str, Any]], str], None]


def paths(namespace: str | None) -> dict[str, str]:
    """Where each watched kind is listed: in ``namespace``, or every namespace (None)."""
    if namespace is None:
        return {SERVICE: "/api/v1/services", ROLE: "/apis/rbac.authorization.k8s.io/v1/roles"}
    return {SERVICE: kubeclient.core_path(namespace, "services"),
            ROLE: kubeclient.roles_path(namespace)}


def slim_child(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller reads of a child: whose it is (mesh label, owner uid), no spec."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "labels",
                                               "ownerReferences") if k in meta}}


def owner(child: Mapping[str, Any]) -> tuple[tuple[str, str], str] | None:
    """The (namespace, mesh) key and the mesh uid a child belongs to, if it names them."""
    meta = child.get("metadata") or {}
    mesh = (meta.get("labels") or {}).get(contract.MESH_LABEL)
    uids = [o.get("uid") for o in meta.get("ownerReferences") or []
            if o.get("kind") == contract.KIND and o.get("name") == mesh]
    if not mesh or not meta.get("namespace") or not uids:
        return None
    return (str(meta["namespace"]), str(mesh)), str(uids[0])


def start(client: kubeclient.KubeClient, namespace: str | None, event: ChildEvent,
          listed: ChildrenListed) -> list[listwatch.ListWatch]:
    """One running watch per watched kind over ``namespace`` (None: every namespace)."""
    watches = []
    for kind, path in paths(namespace).items():
        watch = listwatch.ListWatch(client, path, SELECTOR, slim_child, partial(event, kind),
                                    partial(listed, kind))
        watch.start()
        watches.append(watch)
    return watches
