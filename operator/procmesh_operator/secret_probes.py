"""Whether a mesh's token Secret is still there, asked without reading it: a dry-run create.

The operator may create Secrets but never read them (:mod:`.token_secrets` says why), so it
cannot GET the Secret its proc pods mount. A create of that name with ``dryRun=All`` goes through
admission and the storage layer's existence check and is never persisted: AlreadyExists means
the Secret is there, success means it is gone. Nothing of it is kept: the token rendered into
the request is a fresh random one, thrown away.

Why it matters: :mod:`.token_secrets` never gives a mesh with pods a new token (its running procs
hold the old one), so a Secret deleted under running procs stays deleted, and every proc started
afterwards waits in ContainerCreating for its token volume. :mod:`.reconciling` asks when the
answer matters (:func:`due`): when it has just created pods for a mesh that ran before (a
restart, a replaced proc), and while the last status reports the Secret missing (so that the
report clears once the Secret is back, and survives an operator restart); never per pod event
of a healthy mesh. :mod:`.statuses` reports the answer (``TokenSecretMissing``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import kubeclient, rendering, specs

logger = logging.getLogger("procmesh_operator.secret_probes")


def reported(mesh: specs.MeshSpec, previous: Mapping[str, Any] | None) -> str | None:
    """The token Secret that the status last written reports missing (in any condition: a
    failed reconcile replaces Degraded's reason, not Ready's), or None."""
    if not any(c.get("reason") == contract.TOKEN_SECRET_MISSING
               for c in (previous or {}).get("conditions") or []):
        return None
    try:
        return mesh.token_secret
    except ValueError:  # a status naming a Secret not ours: token_secrets.py refuses the mesh
        return None


def due(mesh: specs.MeshSpec, previous: Mapping[str, Any] | None, *, replaced: bool) -> bool:
    """Whether to ask this reconcile: it created pods for a mesh that ran before
    (``replaced``), or the last status reports the Secret missing."""
    return replaced or reported(mesh, previous) is not None


async def exists(client: kubeclient.KubeClient, mesh: specs.MeshSpec) -> bool | None:
    """Whether the Secret the mesh's pods mount exists (None: the API server would not say,
    e.g. an admission webhook that refuses dry runs; logged, and nothing is concluded)."""
    name = mesh.token_secret
    try:
        await client.create(kubeclient.core_path(mesh.namespace, "secrets"),
                            rendering.render_secret(mesh, rendering.new_token(), name),
                            dry_run=True)
    except kubeclient.ApiError as e:
        if e.conflict:
            return True
        logger.info("could not tell whether Secret %s/%s exists (a dry-run create): %s",
                    mesh.namespace, name, e)
        return None
    except kubeclient.Unanswered as e:
        logger.info("could not tell whether Secret %s/%s exists: %s", mesh.namespace, name, e)
        return None
    return False
