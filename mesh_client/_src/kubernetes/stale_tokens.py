"""What a client says when a proc refuses the token its mesh's Secret holds.

Used by ``attach`` (:mod:`.attaching`) and ``procmesh top`` (:mod:`mesh_client._src.cli.commands`),
the two readers of a mesh's Secret. The operator never rewrites a running mesh's Secret and a proc
server reads its token once, at start: a refusal therefore means the Secret changed under the
running procs, and the bare wire error ("wrong mesh token") named neither the Secret nor the way out.
"""

from __future__ import annotations


def refused(namespace: str, name: str, proc: str, secret: str, exc: Exception) -> str:
    """The message for ``exc``, the refusal of ``proc`` (its display name) of mesh ``name``,
    given the token read from Secret ``secret``."""
    return (
        f"ProcMesh {namespace}/{name}: proc {proc} refused the token in Secret {namespace}/{secret} ({exc}). "
        f"The procs read their token when they start and never again, so that Secret no longer holds the token "
        f"they started with: it was changed or recreated while the mesh ran (or the status is stale and the "
        f"address is now another mesh's proc). To put a new token in force, suspend the mesh and resume it "
        f"(kubectl patch pm {name} -n {namespace} --type merge -p '{{\"spec\":{{\"suspend\":true}}}}', then "
        f"false): every proc then starts again on the Secret's token; or delete and recreate the mesh "
        f"(README, 'Rotating a token')"
    )
