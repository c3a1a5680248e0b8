"""The token Secret of a mesh: created under a name the API server picks, recorded in the mesh's
status before anything refers to it, and never read.

Called by :mod:`.reconciling` first in every reconcile (before the access Role, the Service and
the pods, which all name that Secret); renders with :mod:`.rendering`, names from
:mod:`mesh_client._src.contract`.

Why: the operator may create Secrets but never read them (reading a token would let it run code
in the mesh), so when a Secret of a fixed name exists already it cannot tell its own from one
planted to give the mesh a known token. A name chosen by the API server (``generateName``) is
fresh: no one can have made it first. The order is Secret -> ``status.tokenSecretName`` ->
Role -> pods, so whatever stops the operator between two steps, the next attempt is safe:

- before the status write: an orphan Secret, owned by the mesh (garbage collection removes it
  with the mesh); the next attempt makes another;
- after it: the name is in status, so it is this operator's; the Role and pods follow.

A recorded name of a mesh with no pods is created again under that same name: AlreadyExists
means it is still there; success means someone deleted it (a rotation while suspended), and the
procs started next get the new token. A mesh of an older operator has no recorded name and the
legacy ``<mesh>-token``: its access Role (owned by the mesh, created after its Secret) names it,
and the operator records that name. The status field is trusted only with a name the operator
would have given (:func:`contract.is_operator_secret_name`); only the operator writes status (the
chart grants others ``get`` on ``procmeshes/status``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import exit_points, kubeclient, rendering, specs

#: Generated names that collide with an existing Secret before one is fresh (the API server
#: retries collisions itself since Kubernetes 1.32; older ones answer AlreadyExists).
GENERATE_ATTEMPTS = 3
#: Writes of the recorded name, each onto the mesh as just read, before a conflict is an error.
RECORD_ATTEMPTS = 3

Key = tuple[str, str]


class SecretConflict(Exception):
    """The mesh's recorded token Secret, or its access Role, names a Secret the operator would
    never create for it."""


@dataclasses.dataclass
class Ensured:
    """What :meth:`TokenSecrets.ensure` did: the mesh with its token Secret's name, and the
    mesh as the status write returned it (None: no write)."""

    mesh: specs.MeshSpec
    written: dict[str, Any] | None = None


class TokenSecrets:
    """Creates and records the token Secrets of one operator process (through the client each
    call is given: the controller's)."""

    def __init__(self, exit_after: str | None = None) -> None:  # exit_after: tests only
        self.exit_after = exit_after
        # Secrets this process generated and has not recorded yet -> (mesh uid, name): a failed
        # status write is retried with the same name instead of leaving one more orphan.
        self._made: dict[Key, tuple[str, str]] = {}

    def forget(self, key: Key) -> None:
        self._made.pop(key, None)

    async def ensure(self, client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                     has_pods: bool, resource_version: str | None = None) -> Ensured:
        """The mesh's token Secret exists (unless it has pods: a token never changes under
        running procs) and its name is recorded in status. A mesh with
        ``spec.tokenSecretName`` brings its own: nothing to do. ``resource_version``: of the
        mesh body ``mesh`` was parsed from (the status write's precondition)."""
        if mesh.token_secret_name is not None:
            return Ensured(mesh)
        recorded = mesh.recorded_token_secret_name
        if recorded is not None:
            _refuse_unless_ours(mesh, recorded)
        if has_pods:
            return Ensured(mesh)
        key = (mesh.namespace, mesh.name)
        if recorded is not None:
            await self._create_again(client, mesh, recorded)
            return Ensured(mesh)
        uid, made = self._made.get(key, ("", None))
        name = made if uid == mesh.uid else await self._named_by_role(client, mesh)
        fresh = name is None
        if name is None:
            name = await self._generate(client, mesh)
            self._made[key] = (mesh.uid, name)
            exit_points.reached(self.exit_after, exit_points.TOKEN_SECRET_CREATED)
        recorded, written = await self._record(client, mesh, name, resource_version)
        self._made.pop(key, None)  # in status from now on
        exit_points.reached(self.exit_after, exit_points.TOKEN_SECRET_RECORDED)
        _refuse_unless_ours(mesh, recorded)
        mesh = dataclasses.replace(mesh, recorded_token_secret_name=recorded)
        if not fresh or recorded != name:
            await self._create_again(client, mesh, recorded)
        return Ensured(mesh, written)

    async def _generate(self, client: kubeclient.KubeClient, mesh: specs.MeshSpec) -> str:
        """Create a Secret under a generated name, with a fresh token; its name."""
        for _ in range(GENERATE_ATTEMPTS):
            try:
                created = await client.create(
                    kubeclient.core_path(mesh.namespace, "secrets"),
                    rendering.render_secret(mesh, rendering.new_token()))
            except kubeclient.ApiError as e:
                if not e.conflict:
                    raise
                continue  # the random suffix was taken: another one
            return str(created["metadata"]["name"])
        raise kubeclient.ApiError(
            409, "AlreadyExists", f"{GENERATE_ATTEMPTS} generated names "
            f"{contract.secret_name_prefix(mesh.name)}* for the token Secret were all taken; "
            f"retried with backoff")

    async def _create_again(self, client: kubeclient.KubeClient, mesh: specs.MeshSpec,
                            name: str) -> None:
        """Create the recorded ``name``: AlreadyExists is this operator's Secret still there
        (no one could have made the name first); success is a rotation (it was deleted)."""
        try:
            await client.create(kubeclient.core_path(mesh.namespace, "secrets"),
                                     rendering.render_secret(mesh, rendering.new_token(), name))
        except kubeclient.ApiError as e:
            if not e.conflict:
                raise

    async def _record(self, client: kubeclient.KubeClient, mesh: specs.MeshSpec, name: str,
                      resource_version: str | None) -> tuple[str, dict[str, Any]]:
        """Write ``name`` into ``status.tokenSecretName`` onto the version of the mesh that
        this reconcile read (its resourceVersion): after a concurrent write, the mesh is read
        again, and a name another replica recorded meanwhile wins (two names would leave pods
        and Role apart). The recorded name and the mesh as written."""
        path = kubeclient.mesh_path(mesh.namespace, mesh.name, status=True)
        for _ in range(RECORD_ATTEMPTS):
            patch: dict[str, Any] = {"status": {contract.TOKEN_SECRET_STATUS_FIELD: name}}
            if resource_version:
                patch["metadata"] = {"resourceVersion": resource_version}
            try:
                return name, await client.merge_patch(path, patch)
            except kubeclient.ApiError as e:
                if not e.conflict:
                    raise
            body = await client.get(kubeclient.mesh_path(mesh.namespace, mesh.name))
            if (body.get("metadata") or {}).get("uid") != mesh.uid:
                raise kubeclient.ApiError(409, "Conflict", f"ProcMesh {mesh.name} was deleted "
                                          f"and created again while it was reconciled")
            theirs = (body.get("status") or {}).get(contract.TOKEN_SECRET_STATUS_FIELD)
            if theirs:
                return str(theirs), body
            resource_version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        raise kubeclient.ApiError(409, "Conflict", f"the status of ProcMesh {mesh.name} changed "
                                  f"under {RECORD_ATTEMPTS} writes of its token Secret's name")

    async def _named_by_role(self, client: kubeclient.KubeClient, mesh: specs.MeshSpec
                             ) -> str | None:
        """The Secret named by the mesh's own access Role, for a mesh with no recorded name: an
        older operator's mesh (``<mesh>-token``), whose Role it created right after the Secret.
        None when there is no such Role (or it is not this mesh's: the Role step reports it)."""
        role = await client.get_or_none(
            kubeclient.roles_path(mesh.namespace, contract.access_role_name(mesh.name)))
        if role is None or not _owned_by(role, mesh.uid):
            return None
        granted = secrets_granted(role)
        if len(granted) != 1 or not contract.is_operator_secret_name(mesh.name, granted[0]):
            raise SecretConflict(
                f"the access Role {contract.access_role_name(mesh.name)} of this ProcMesh grants "
                f"Secrets {granted}, not one token Secret the operator creates for it: delete "
                f"that Role (the operator creates it again) or recreate the mesh")
        return granted[0]


def _refuse_unless_ours(mesh: specs.MeshSpec, recorded: str) -> None:
    if not contract.is_operator_secret_name(mesh.name, recorded):
        raise SecretConflict(
            f"status.{contract.TOKEN_SECRET_STATUS_FIELD} names Secret {recorded}, which the "
            f"operator never creates for this ProcMesh (it creates "
            f"{contract.secret_name_prefix(mesh.name)}<random>): someone other than the "
            f"operator wrote this mesh's status; delete and recreate the mesh")


def secrets_granted(role: Mapping[str, Any]) -> list[str]:
    """The Secret names an access Role grants ``get`` on (rendering.render_access_role)."""
    return [str(name) for rule in role.get("rules") or []
            if "secrets" in (rule.get("resources") or [])
            for name in rule.get("resourceNames") or []]


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("uid") == uid for o in owners)
