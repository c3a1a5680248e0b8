"""Names, labels, selectors and annotation keys of everything the operator creates.

The single source for child names (like KubeRay's ``association.go``): :mod:`.rendering` builds
objects with these names, :mod:`.reconciling` and :mod:`.stores` find them again with these
selectors, and the CRD's name-length rule (``crds/procmesh.yaml``) is derived from the suffixes
here so every derived name stays a valid DNS label.
"""

from __future__ import annotations

GROUP = "procmesh.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ProcMesh"
PLURAL = "procmeshes"

#: The longest mesh name the CRD accepts. Derived names: "<mesh>-<rank>" with rank < MAX_PROCS
#: (4 digits), "<mesh>-procs" and "<mesh>-token"; all stay within a 63-character DNS label.
MAX_MESH_NAME = 52
MAX_PROCS = 10000

# Label keys on pods (DESIGN.md: procmesh.io/mesh, procmesh.io/rank, one per coordinate).
MESH_LABEL = "procmesh.io/mesh"
RANK_LABEL = "procmesh.io/rank"
COORD_LABEL_PREFIX = "coord.procmesh.io/"  # a sub-domain, so a dimension named "rank" cannot clash
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "procmesh-operator"

# Annotation keys on pods: what the operator decided, read back for the GPU budget of other meshes.
GPU_DEVICE_ANNOTATION = "procmesh.io/gpu-device"
MEMORY_FRACTION_ANNOTATION = "procmesh.io/memory-fraction"
NODE_ANNOTATION = "procmesh.io/node"
GENERATION_ANNOTATION = "procmesh.io/generation"

# Taints the node lifecycle controller puts on a lost node (well_known_taints.go), NoExecute.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"  # node Ready=False
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"  # node Ready=Unknown (no heartbeat)
NODE_LOSS_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)

# The proc server container and its token.
CONTAINER_NAME = "proc-server"
PORT_NAME = "proc"
TOKEN_KEY = "token"
TOKEN_VOLUME = "procmesh-token"
TOKEN_DIR = "/var/run/procmesh"
TOKEN_PATH = f"{TOKEN_DIR}/{TOKEN_KEY}"

#: Role names are DNS subdomains (253 characters), so this suffix is not part of the length rule.
ACCESS_ROLE_SUFFIX = "-procmesh-access"


def pod_name(mesh: str, rank: int) -> str:
    """The pod of the proc at ``rank``: ``<mesh>-<rank>`` (also its hostname)."""
    return f"{mesh}-{rank}"


def service_name(mesh: str) -> str:
    """The headless Service that gives every proc pod a DNS name (the pods' subdomain)."""
    return f"{mesh}-procs"


def secret_name(mesh: str) -> str:
    """The per-mesh Secret whose key ``token`` the proc servers require and the client reads."""
    return f"{mesh}-token"


def access_role_name(mesh: str) -> str:
    """The Role that grants use of ``mesh`` (get its ProcMesh and its token Secret, nothing
    else); the operator creates it, an admin binds it: ``--role=<mesh>-procmesh-access``."""
    return f"{mesh}{ACCESS_ROLE_SUFFIX}"


def coord_label(dim: str) -> str:
    """The label key that carries a pod's coordinate along dimension ``dim``."""
    return f"{COORD_LABEL_PREFIX}{dim}"


def mesh_labels(mesh: str) -> dict[str, str]:
    """Labels every child of ``mesh`` carries; also the Service's selector."""
    return {MESH_LABEL: mesh, MANAGED_BY_LABEL: MANAGED_BY}


def mesh_selector(mesh: str) -> dict[str, str]:
    """The selector matching the pods of ``mesh`` (the Service selector)."""
    return {MESH_LABEL: mesh}


def mesh_label_selector(mesh: str) -> str:
    """``mesh_selector`` in the ``labelSelector`` query syntax."""
    return f"{MESH_LABEL}={mesh}"


def rank_of_pod_name(mesh: str, name: str) -> int | None:
    """The rank encoded in a pod name of ``mesh``, or None if the name is not one of ours."""
    prefix = f"{mesh}-"
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix):]
    if not tail.isdigit() or (len(tail) > 1 and tail[0] == "0"):
        return None
    return int(tail)
