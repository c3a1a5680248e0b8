"""A grant of one mesh to one subject: a RoleBinding of the mesh's access Role, owned by the mesh.

Used by ``procmesh grant`` (:mod:`mesh_client._src.cli.commands`); the API call is
:meth:`.api.KubeApi.create_grant`. Why owned: a RoleBinding names its Role by name only, and the
operator makes ``<mesh>-procmesh-access`` again for every mesh of that name. A binding made with
``kubectl create rolebinding`` outlives its mesh, so whoever it named could read the token of,
and run code in, the next mesh someone else creates under that name. Owned by the mesh, garbage
collection deletes the binding with it. The operator cannot do this for us: it holds no
RoleBinding rights, on purpose.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mesh_client._src import contract

#: ``--user``, ``--group``, ``--serviceaccount``, as ``kubectl create rolebinding`` takes them.
KINDS = ("user", "group", "serviceaccount")


def subject(kind: str, name: str) -> dict[str, str]:
    """The RBAC subject; a service account is ``<namespace>:<name>``, as kubectl writes it."""
    if kind == "serviceaccount":
        namespace, sep, account = name.partition(":")
        if not (sep and namespace and account):
            raise ValueError(f"--serviceaccount {name!r}: give <namespace>:<name>, as kubectl takes it")
        return {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    if kind not in KINDS or not name:
        raise ValueError(f"grant to a user, a group or a service account, not {kind} {name!r}")
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind.capitalize(), "name": name}


def binding_name(mesh: str, kind: str, name: str) -> str:
    """One binding per mesh and subject: the Role's name, the kind, and a digest of the name
    (user and group names may hold characters a resource name cannot)."""
    digest = hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()[:10]
    return f"{contract.access_role_name(mesh)}-{kind}-{digest}"


def render(mesh: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """The RoleBinding that lets ``kind`` ``name`` use ``mesh`` (a ProcMesh as read), for as
    long as that mesh, and not the next one of its name, exists."""
    meta = mesh["metadata"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": binding_name(meta["name"], kind, name),
            "labels": {contract.MESH_LABEL: meta["name"]},
            "ownerReferences": [contract.owner_reference(meta["name"], meta["uid"])],
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": contract.access_role_name(meta["name"])},
        "subjects": [subject(kind, name)],
    }


def owned_by(binding: dict[str, Any], mesh: dict[str, Any]) -> bool:
    """Whether ``binding`` goes with this very mesh (not an earlier one of the same name)."""
    owners = (binding.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("uid") == mesh["metadata"]["uid"] for o in owners)
