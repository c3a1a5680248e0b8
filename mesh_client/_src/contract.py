"""The contract between the operator and the client: every fact both sides must agree on.

Pure and dependency-free (standard library only), so the operator can import it without the rest
of ``mesh_client`` (``.importlinter`` forbids it anything else). What lives here, and nowhere else:

- the ProcMesh API coordinates, the ``spec.gpus.mode`` values, and the names (pods, Service,
  token Secret, access Role), labels and annotation keys of a mesh's children;
- the proc port and the token Secret's key;
- condition types and the reasons a client acts on (:data:`FATAL_REASONS`, :data:`WAITING_REASONS`);
- the ``PROCMESH_*`` environment of the proc server: names, rendering and parsing, both directions
  (the operator's pod builder renders it, :mod:`mesh_client._src.server.config` parses it);
- the row-major rank/coordinate arithmetic of a mesh's shape;
- how ``status.procs`` travels for big meshes (:func:`encode_proc_table`, :func:`status_procs`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# --- API coordinates -------------------------------------------------------------------------

GROUP = "procmesh.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ProcMesh"
PLURAL = "procmeshes"
SHORT_NAME = "pm"  # the CRD's shortNames (crds/procmesh.yaml), which the CLI accepts as kubectl does


def is_object_name(name: str) -> bool:
    """Whether ``name`` can be one object's in a request path: an empty one is the collection's
    (a DELETE there deletes every mesh of the namespace), '.', '..' and '/' move the path."""
    return name not in ("", ".", "..") and "/" not in name

# --- Children: names, labels, annotations ------------------------------------------------------

#: The longest mesh name the CRD accepts. Derived names: "<mesh>-<rank>" with rank < MAX_PROCS
#: (4 digits), "<mesh>-procs", "<mesh>-token" (generated "<mesh>-token-<random>" names are cut to 63 by
#: the API server) and "<mesh>-procmesh-access" stay within 63
#: characters (a DNS label for the first three; a Role name for the last).
MAX_MESH_NAME = 52
MAX_PROCS = 10000

MESH_LABEL = "procmesh.io/mesh"
RANK_LABEL = "procmesh.io/rank"
COORD_LABEL_PREFIX = "coord.procmesh.io/"  # a sub-domain, so a dimension named "rank" cannot clash
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "procmesh-operator"

#: What the operator decided for a pod, read back by the operator (budgets) and the client (GPU).
GPU_DEVICE_ANNOTATION = "procmesh.io/gpu-device"
MEMORY_FRACTION_ANNOTATION = "procmesh.io/memory-fraction"
NODE_ANNOTATION = "procmesh.io/node"
GENERATION_ANNOTATION = "procmesh.io/generation"
#: On a ProcMesh with ``spec.lease``: the holder's last renewal (RFC 3339, the holder's clock).
#: The operator measures the lease from when it sees this value change, on its own clock.
LEASE_RENEW_ANNOTATION = "procmesh.io/lease-renew-time"
#: The Event reason of a mesh deleted because its lease lapsed.
LEASE_EXPIRED = "LeaseExpired"

#: The proc server's port when ``spec.port`` is not set (the CRD's default says the same).
PROC_PORT = 26600
CONTAINER_NAME = "proc-server"
PORT_NAME = "proc"
#: The key of the mesh token in its Secret.
TOKEN_KEY = "token"
#: The first dimension of every ProcMesh's shape; ``spec.perHost`` follows it.
HOSTS_DIM = "hosts"

#: ``spec.gpus.mode`` values (the CRD's enum says the same).
GPU_MODE_NONE = "none"
GPU_MODE_PLUGIN = "plugin"
GPU_MODE_PINNED = "pinned"
GPU_MODE_DRA = "dra"
GPU_MODES = (GPU_MODE_NONE, GPU_MODE_PLUGIN, GPU_MODE_PINNED, GPU_MODE_DRA)

#: ``spec.placement.hosts`` values (the CRD's enum says the same): by default a host is a
#: machine (its procs on one node, no two hosts of a mesh on one node); ``Any`` lifts both.
HOSTS_ON_DISTINCT_NODES = "DistinctNodes"
HOSTS_ON_ANY_NODES = "Any"
HOST_PLACEMENTS = (HOSTS_ON_DISTINCT_NODES, HOSTS_ON_ANY_NODES)

#: ``spec.restartPolicy`` values (the CRD's enum says the same): a failed proc stays failed (the
#: mesh Degraded); its pod is recreated (the default); or every pod of the mesh is deleted and
#: the mesh recreated once all are gone, its other procs stopped meanwhile, also while the
#: failed one waits out its restart back-off (:data:`CRASH_LOOP_BACK_OFF`).
RESTART_NEVER = "Never"
RESTART_PROC = "RestartProc"
RESTART_MESH = "RestartMesh"
RESTART_POLICIES = (RESTART_NEVER, RESTART_PROC, RESTART_MESH)
DEFAULT_RESTART_POLICY = RESTART_PROC
#: ``spec.maxRestarts`` where unset (the CRD's default): restarts a mesh may use, over its life,
#: before a failed proc stays failed (:data:`RESTART_LIMIT_REACHED`).
DEFAULT_MAX_RESTARTS = 3

#: dra mode: the DeviceClass a claim requests when ``spec.gpus.deviceClassName`` is unset, and the
#: driver whose attributes ``deviceIDs`` select on: the NVIDIA DRA GPU driver's (docs/dra.md).
DRA_DRIVER = "gpu.nvidia.com"
DEFAULT_DEVICE_CLASS = "gpu.nvidia.com"
#: The ResourceClaim API the operator uses in dra mode (resource.k8s.io/v1, Kubernetes 1.34+).
RESOURCE_API_VERSION = "resource.k8s.io/v1"


def owner_reference(mesh: str, uid: str) -> dict[str, Any]:
    """A child's reference to its ProcMesh, so garbage collection deletes it with that very
    mesh (by uid: not a later one of the same name). The operator marks its own children
    ``controller`` too; a client's (the token Secret it writes, a grant's RoleBinding) are not."""
    return {"apiVersion": API_VERSION, "kind": KIND, "name": mesh, "uid": uid}


def pod_name(mesh: str, rank: int) -> str:
    """The pod of the proc at ``rank``: ``<mesh>-<rank>`` (also its hostname)."""
    return f"{mesh}-{rank}"


def service_name(mesh: str) -> str:
    """The headless Service that gives every proc pod a DNS name (the pods' subdomain)."""
    return f"{mesh}-procs"


def secret_name(mesh: str) -> str:
    """The legacy token Secret name, ``<mesh>-token``: what operators before
    ``status.tokenSecretName`` created (meshes they made keep it)."""
    return f"{mesh}-token"


#: The status field that names the token Secret the operator created for a mesh
#: (``status.tokenSecretName``): the API server chose the name, so nobody could have made a
#: Secret of that name before it.
TOKEN_SECRET_STATUS_FIELD = "tokenSecretName"
#: The status field of the procs that failed in a row (rank, failed pod's uid, failures in a
#: row, back-off, restart time): what the operator's restart back-off needs to survive its own
#: restart or a new leader.
CRASH_LOOPS_STATUS_FIELD = "crashLoops"
#: The API server's generateName: a prefix of at most 58 characters (longer ones are cut)
#: plus 5 random characters (k8s.io/apiserver pkg/storage/names).
GENERATED_PREFIX_MAX = 58
GENERATED_SUFFIX_LENGTH = 5
#: The characters of that suffix (k8s.io/apimachinery pkg/util/rand: no vowels, no 0, 1): a
#: name with others was not generated, e.g. ``a-token-token``, the legacy Secret of mesh
#: ``a-token``, which mesh ``a`` must not take for its own.
GENERATED_SUFFIX_ALPHABET = frozenset("bcdfghjklmnpqrstvwxz2456789")


def secret_name_prefix(mesh: str) -> str:
    """The ``generateName`` of the token Secret the operator creates for ``mesh``:
    ``<mesh>-token-``, the API server appending a random suffix."""
    return f"{mesh}-token-"


def is_operator_secret_name(mesh: str, name: str) -> bool:
    """Whether ``name`` is one the operator gives ``mesh``'s token Secret: the legacy
    :func:`secret_name` or one generated from :func:`secret_name_prefix`. Anything else in
    ``status.tokenSecretName`` was not written by the operator, and is not trusted: it would
    make the mesh mount, and its access Role grant, some other Secret."""
    base = secret_name_prefix(mesh)[:GENERATED_PREFIX_MAX]
    suffix = name[len(base):]
    return name == secret_name(mesh) or (
        name.startswith(base) and len(suffix) == GENERATED_SUFFIX_LENGTH
        and set(suffix) <= GENERATED_SUFFIX_ALPHABET)


#: Role names are DNS subdomains (253 characters), so this suffix is not part of the length rule.
ACCESS_ROLE_SUFFIX = "-procmesh-access"


def access_role_name(mesh: str) -> str:
    """The Role that grants use of ``mesh`` (get its ProcMesh and its token Secret, nothing
    else); the operator creates it, an admin binds it: ``--role=<mesh>-procmesh-access``."""
    return f"{mesh}{ACCESS_ROLE_SUFFIX}"


def token_secret_name(mesh: str, spec_token_secret_name: str | None,
                      status_token_secret_name: str | None = None) -> str:
    """The Secret holding ``mesh``'s token: ``spec.tokenSecretName`` (the creator made it)
    when set, else the one the operator created and recorded in ``status.tokenSecretName``,
    else (a mesh of an older operator, or one not reconciled yet) the legacy
    :func:`secret_name`. Raises ValueError when the status names a Secret the operator would
    never create for this mesh (:func:`is_operator_secret_name`)."""
    if spec_token_secret_name:
        return spec_token_secret_name
    if status_token_secret_name:
        if not is_operator_secret_name(mesh, status_token_secret_name):
            raise ValueError(
                f"status.{TOKEN_SECRET_STATUS_FIELD} of ProcMesh {mesh} names Secret "
                f"{status_token_secret_name}, which the operator never creates for it (it "
                f"creates {secret_name_prefix(mesh)}<random>): someone other than the operator "
                f"wrote that status; delete and recreate the mesh")
        return status_token_secret_name
    return secret_name(mesh)


def claim_name(mesh: str, host: int) -> str:
    """dra mode: the ResourceClaim of host ``host`` of ``mesh`` (one request per local index;
    a co-located mesh's pods reference its partner's claims)."""
    return f"{mesh}-gpus-{host}"


def claim_request(local_index: int) -> str:
    """dra mode: the request, in a host's claim, of the device of local index ``local_index``."""
    return f"gpu-{local_index}"


def coord_label(dim: str) -> str:
    """The label key that carries a pod's coordinate along dimension ``dim``."""
    return f"{COORD_LABEL_PREFIX}{dim}"


def mesh_label_selector(mesh: str) -> str:
    """The pods of ``mesh`` in the ``labelSelector`` query syntax."""
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


# --- Conditions --------------------------------------------------------------------------------

#: Ready: the summary. True when every desired proc's pod is Ready.
READY = "Ready"
#: Progressing: True while the operator works toward the spec; False once complete or stuck.
PROGRESSING = "Progressing"
#: Degraded: True when a proc failed and will not be restarted, or the last reconcile failed.
DEGRADED = "Degraded"
#: GPUBudgetSatisfied: the placement check of the mesh's devices.
GPU_BUDGET = "GPUBudgetSatisfied"
#: Scheduled: True once every proc's pod is on a node. False while the mesh waits as one gang
#: (for all its pods, for room, or for the scheduler), with the reason and message why.
SCHEDULED = "Scheduled"
#: The scheduling gate proc pods carry while their mesh waits to be released as one gang.
GANG_GATE = "procmesh.io/gang"
#: Admitted: only on a mesh labelled kueue.x-k8s.io/queue-name. True while Kueue admits its
#: Workload; False with Kueue's reason (QuotaReserved's, e.g. Pending, or Evicted's, e.g.
#: Preempted) while the mesh has no procs because of its queue.
ADMITTED = "Admitted"
#: Ready/Scheduled/Progressing reason of a queued mesh waiting for Kueue's admission.
QUEUED = "Queued"
#: The label (on the ProcMesh) that queues the mesh in a Kueue LocalQueue, as on a Kueue Job.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

#: Ready=False: procs are on a NotReady, unreachable or deleted node; the operator restarts them
#: once their node-loss toleration is up (a client's lost-proc message says so).
NODE_LOST = "NodeLost"
#: Reasons after which waiting for Ready is pointless: the client fails at once on them.
INVALID_COLOCATION = "InvalidColocation"
DEVICE_NOT_FOUND = "DeviceNotFound"
BUDGET_EXCEEDED = "GPUBudgetExceeded"
#: No node, ready or not, can take a host of a pinned mesh, even with other meshes' procs gone.
NO_NODE_FITS = "NoNodeFits"
RESTART_LIMIT_REACHED = "RestartLimitReached"
PROC_FAILED = "ProcFailed"
#: dra mode: the kube-scheduler cannot allocate a proc's ResourceClaim (its message is quoted).
CLAIM_UNALLOCATABLE = "ResourceClaimUnallocatable"
#: dra mode: a proc's pod waits for a ResourceClaim that is being deleted (by hand, or by
#: garbage collection) while other pods still use it. The scheduler places no pod on a claim
#: being deleted, and the API server keeps it (its delete-protection finalizer) until every
#: pod using it ends, so the proc does not start until then: the client fails at once.
CLAIM_DELETED = "ResourceClaimDeleted"
#: dra mode on a cluster that does not serve resource.k8s.io/v1 (Kubernetes before 1.34).
DRA_NOT_SERVED = "DRANotServed"
#: Degraded (and Ready, while a proc waits for it): the token Secret that the mesh's pods mount
#: is gone while procs run. Procs started from then on cannot start (their token volume is
#: missing), and the operator gives running procs no new token: a suspend and resume (or a new
#: mesh) is the way out, so the client fails at once on it.
TOKEN_SECRET_MISSING = "TokenSecretMissing"
#: The kubelet's container waiting reasons after which a proc's pod will not start without a
#: change (an image that is not there or not allowed, a config the container cannot start with).
#: The operator reports them as Ready's reason; the client fails at once on them.
STUCK_WAITING_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull",
                                   "InvalidImageName", "CreateContainerConfigError",
                                   "CreateContainerError"})
#: The API server refused a proc pod at create (Pod Security, a LimitRange, a quota that counts
#: requests the template does not set, another admission check): a change to the mesh, or to
#: the namespace's policies, is needed. The operator keeps retrying, with backoff.
POD_REFUSED = "PodRefused"
#: Degraded=True: an API request of a reconcile failed (or a child under a derived name is not
#: the mesh's own); retried with backoff. Not fatal, but while it lasts it is why the mesh is not
#: Ready, so a client's wait says it rather than the Scheduled or Ready condition it holds back.
RECONCILE_ERROR = "ReconcileError"
FATAL_REASONS = frozenset({INVALID_COLOCATION, DEVICE_NOT_FOUND, BUDGET_EXCEEDED, NO_NODE_FITS,
                           RESTART_LIMIT_REACHED, PROC_FAILED, CLAIM_UNALLOCATABLE,
                           CLAIM_DELETED, DRA_NOT_SERVED, TOKEN_SECRET_MISSING, POD_REFUSED}) | STUCK_WAITING_REASONS

#: Refusals that clear without a change to the mesh, so the mesh is placed once they do: the
#: devices it needs hold other meshes' procs (room frees as they end), no ready node fits but a
#: NotReady, cordoned or tainted one may (or its procs' node is gone and they are placed again),
#: the ``colocateWith`` mesh does not exist yet or its procs are not scheduled yet, the namespace's
#: ResourceQuota has no room for a proc pod yet, failed procs wait out their restart back-off
#: (:data:`CRASH_LOOP_BACK_OFF`). The operator says
#: them with Progressing True (it keeps trying) and phase Waiting; the client keeps waiting on
#: them and shows the message.
WAITING_FOR_GPU_BUDGET = "WaitingForGPUBudget"
WAITING_FOR_NODE = "WaitingForNode"
WAITING_FOR_COLOCATED = "WaitingForColocatedMesh"
#: A proc pod's create was refused for the namespace's ResourceQuota: created once it has room.
WAITING_FOR_QUOTA = "WaitingForQuota"
#: Failed procs wait out their restart back-off (they failed again soon after their last
#: restart): restarted when it ends, as the kubelet restarts a container in CrashLoopBackOff.
#: Ready's and Progressing's reason; the message names the procs, how their pods ended and when
#: they are restarted.
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
WAITING_REASONS = frozenset({WAITING_FOR_GPU_BUDGET, WAITING_FOR_NODE, WAITING_FOR_COLOCATED,
                             WAITING_FOR_QUOTA, CRASH_LOOP_BACK_OFF})


# --- Rank arithmetic ---------------------------------------------------------------------------
# Row-major over ordered dimensions: the last dimension varies fastest. The operator (pod labels,
# PROCMESH_COORDS, status.procs), the actor layer (points of a mesh) and the SPMD environment
# (RANK) all count this way, so a proc's rank means the same on both sides.

def unravel(rank: int, sizes: Sequence[int]) -> tuple[int, ...]:
    """The index along each dimension of the point at ``rank``."""
    out: list[int] = []
    rest = rank
    for extent in reversed(sizes):
        rest, index = divmod(rest, extent)
        out.append(index)
    if rest or rank < 0:  # a rank in range leaves nothing over
        raise IndexError(f"rank {rank} is outside a mesh of {math.prod(sizes)} procs")
    out.reverse()
    return tuple(out)


def ravel(indices: Sequence[int], sizes: Sequence[int]) -> int:
    """The rank of the point with these indices (the inverse of :func:`unravel`)."""
    if len(indices) != len(sizes):
        raise IndexError(f"{len(indices)} coordinates given for {len(sizes)} dimensions")
    rank = 0
    for index, extent in zip(indices, sizes):
        if not 0 <= index < extent:
            raise IndexError(f"coordinate {index} is outside size {extent}")
        rank = rank * extent + index
    return rank


# The last dimension is the local one (a host's procs: LOCAL_RANK, a pinned device, a dra
# claim's request), except in a mesh of hosts alone (no perHost, or sliced to one proc per host):
# each proc is alone on its machine, local 0 of 1, as torchrun's --nproc-per-node=1. The
# operator (devices, claims) and the SPMD environment both count so.

def local_size(labels: Sequence[str], sizes: Sequence[int]) -> int:
    """How many procs share a host: the size of the last dimension, 1 for hosts alone."""
    return 1 if _hosts_alone(labels) else sizes[-1]


def local_index(labels: Sequence[str], indices: Sequence[int]) -> int:
    """A point's index among its host's procs (``indices``: along each dimension); 0 for hosts alone."""
    return 0 if _hosts_alone(labels) else indices[-1]


def _hosts_alone(labels: Sequence[str]) -> bool:
    return labels[-1] == HOSTS_DIM


def coords_of(rank: int, dims: Sequence[tuple[str, int]]) -> dict[str, int]:
    """The coordinates of ``rank`` in named ``dims``, by name, in dimension order."""
    return dict(zip((name for name, _ in dims), unravel(rank, [s for _, s in dims])))


def rank_of(coords: Mapping[str, int], dims: Sequence[tuple[str, int]]) -> int:
    """The rank of the point ``coords`` in named ``dims`` (the inverse of :func:`coords_of`)."""
    for name, extent in dims:
        if not 0 <= coords[name] < extent:
            raise IndexError(f"coordinate {name}={coords[name]} is outside size {extent}")
    return ravel([coords[name] for name, _ in dims], [s for _, s in dims])


# --- status.procs of big meshes ------------------------------------------------------------------
# A listed ``status.procs[]`` entry is about 190 bytes of JSON (250 with a GPU UUID): 4,096 procs
# would make one object of about 1 MB, against etcd's 1.5 MiB limit, rewritten whole at every
# status change. So a mesh of more than MAX_LISTED_PROCS procs publishes ``status.procTable``
# instead, the same facts as columns (about 60 bytes a proc, most of it its pod's UID), and leaves ``status.procs`` empty;
# what the rank determines (coordinates, pod name) is not written at all. Small meshes keep the
# list, which people read with kubectl. Readers call :func:`status_procs` for either form.

#: The largest mesh whose status lists its procs one entry each.
MAX_LISTED_PROCS = 256


def lists_procs(size: int) -> bool:
    """Whether a mesh of ``size`` procs lists them in ``status.procs`` (else ``procTable``)."""
    return size <= MAX_LISTED_PROCS


def format_ranks(ranks: Iterable[int]) -> str:
    """Ranks as intervals, ``"0-3,5,7-9"`` (the form of an Indexed Job's ``completedIndexes``)."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_ranks(text: str) -> list[int]:
    """The ranks of :func:`format_ranks`'s form, ascending; ValueError on anything else."""
    ranks: list[int] = []
    for part in text.split(",") if text else []:
        first, sep, last = part.partition("-")
        if not first.isdigit() or (sep and not last.isdigit()):
            raise ValueError(f"{text!r} is not a list of ranks and rank intervals like '0-3,5'")
        ranks.extend(range(int(first), int(last if sep else first) + 1))
    return ranks


def encode_proc_table(procs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``status.procTable`` from the entries ``status.procs`` would list (ranks 0..n-1 in order):
    per-rank columns (``node`` indexes ``nodes``, -1 when unbound; ``podIPs`` and ``gpus`` empty
    when unknown), rank intervals for ``ready`` and for each ``phases[].phase``, the port once."""
    nodes: list[str] = []
    node_index: dict[str, int] = {}
    node_col: list[int] = []
    ips: list[str] = []
    uids: list[str] = []
    gpus: list[str] = []
    phases: dict[str, list[int]] = {}
    ports: set[int] = set()
    for rank, proc in enumerate(procs):
        if proc.get("rank") != rank:
            raise ValueError(f"entry {rank} of the procs has rank {proc.get('rank')}")
        node = proc.get("node")
        if node is None:
            node_col.append(-1)
        else:
            node_col.append(node_index.setdefault(str(node), len(nodes)))
            if node_col[-1] == len(nodes):
                nodes.append(str(node))
        address = proc.get("address")
        ip = ""
        if address:
            ip, _, port = str(address).rpartition(":")
            ports.add(int(port))
        ips.append(ip)
        uids.append(str(proc.get("podUID") or ""))
        gpus.append(str(proc.get("gpu") or ""))
        if proc.get("podPhase"):
            phases.setdefault(str(proc["podPhase"]), []).append(rank)
    if len(ports) > 1:
        raise ValueError(f"the procs listen on several ports {sorted(ports)}; a mesh has one")
    table: dict[str, Any] = {
        "size": len(procs), "nodes": nodes, "node": node_col, "podIPs": ips,
        "ready": format_ranks(r for r, p in enumerate(procs) if p.get("ready")),
        "phases": [{"phase": k, "ranks": format_ranks(v)} for k, v in sorted(phases.items())],
    }
    # Every key is always written, "unknown" included (port 0, gpus []): the operator writes
    # status with a merge patch, in which a key left out keeps its old value.
    table["port"] = ports.pop() if ports else 0
    table["gpus"] = gpus if any(gpus) else []
    table["podUIDs"] = uids if any(uids) else []
    return table


def decode_proc_table(table: Mapping[str, Any], mesh: str,
                      dims: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """The ``status.procs`` entries of a ``status.procTable`` (the inverse of
    :func:`encode_proc_table`) for mesh ``mesh`` of shape ``dims`` (``hosts`` first)."""
    size = int(table.get("size") or 0)
    if size != math.prod(s for _, s in dims):
        raise ValueError(f"status.procTable of ProcMesh {mesh} has {size} procs, its shape "
                         f"{list(dims)} has {math.prod(s for _, s in dims)}")
    nodes = list(table.get("nodes") or [])
    node_col = list(table.get("node") or [-1] * size)
    ips = list(table.get("podIPs") or [""] * size)
    gpus = list(table.get("gpus") or [""] * size)
    uids = list(table.get("podUIDs") or [""] * size)
    if not len(node_col) == len(ips) == len(gpus) == len(uids) == size:
        raise ValueError(f"status.procTable of ProcMesh {mesh} has columns of lengths "
                         f"{len(node_col)}, {len(ips)}, {len(gpus)}, {len(uids)} for {size} procs")
    ready = set(parse_ranks(str(table.get("ready") or "")))
    phase_of: dict[int, str] = {}
    for group in table.get("phases") or []:
        for rank in parse_ranks(str(group.get("ranks") or "")):
            phase_of[rank] = str(group.get("phase"))
    port = table.get("port")
    names = [name for name, _ in dims]
    sizes = [extent for _, extent in dims]
    procs: list[dict[str, Any]] = []
    for rank in range(size):
        entry: dict[str, Any] = {"rank": rank, "coords": dict(zip(names, unravel(rank, sizes))),
                                 "pod": pod_name(mesh, rank), "ready": rank in ready}
        if node_col[rank] >= 0:
            entry["node"] = nodes[node_col[rank]]
        if ips[rank] and port:
            entry["address"] = f"{ips[rank]}:{port}"
            if uids[rank]:
                entry["podUID"] = uids[rank]
        if rank in phase_of:
            entry["podPhase"] = phase_of[rank]
        if gpus[rank]:
            entry["gpu"] = gpus[rank]
        procs.append(entry)
    return procs


def mesh_dims(spec: Mapping[str, Any]) -> list[tuple[str, int]]:
    """A ProcMesh spec's shape as named dimensions: ``hosts``, then ``perHost`` in order."""
    return [(HOSTS_DIM, int(spec.get(HOSTS_DIM, 1))),
            *((str(d["name"]), int(d["size"])) for d in spec.get("perHost") or [])]


def status_procs(mesh: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ProcMesh's procs by rank, from ``status.procs`` or, for a big mesh, ``status.procTable``."""
    status = mesh.get("status") or {}
    listed = status.get("procs") or []
    table = status.get("procTable")
    if listed or not table:
        return [dict(p) for p in listed]
    return decode_proc_table(table, str((mesh.get("metadata") or {}).get("name", "")),
                             mesh_dims(mesh.get("spec") or {}))


# --- The proc server's environment -------------------------------------------------------------

LISTEN_HOST = "PROCMESH_LISTEN_HOST"
PORT = "PROCMESH_PORT"
TOKEN = "PROCMESH_TOKEN"
TOKEN_FILE = "PROCMESH_TOKEN_FILE"
MESH = "PROCMESH_MESH"
RANK = "PROCMESH_RANK"
COORDS = "PROCMESH_COORDS"
MEMORY_FRACTION = "PROCMESH_MEMORY_FRACTION"
MAX_MESSAGE_BYTES = "PROCMESH_MAX_MESSAGE_BYTES"
#: The least a proc's PROCMESH_MAX_MESSAGE_BYTES may be. A client checks a call against the
#: proc's limit once IDENTIFY has told it; on a new link, before that, a call over this size
#: waits for the answer (10 s at most; not on the I/O thread), so that a call over the limit is
#: refused in the caller instead of closing the link.
MIN_MAX_MESSAGE_BYTES = 64 * 1024
READY_FD = "PROCMESH_READY_FD"
LIFELINE = "PROCMESH_LIFELINE"
SYS_PATH = "PROCMESH_SYS_PATH"
MAX_UNAUTHENTICATED = "PROCMESH_MAX_UNAUTHENTICATED"
HANDSHAKE_TIMEOUT_SECONDS = "PROCMESH_HANDSHAKE_TIMEOUT_SECONDS"
#: The exit status of a proc server stopped by SIGTERM (default 0, an orderly stop).
SIGTERM_EXIT = "PROCMESH_SIGTERM_EXIT"
#: What the operator renders for it: a pod's proc is never stopped by SIGTERM from its mesh
#: (STOP does that; the operator knows its own deletions), so the sender is the cluster (an
#: eviction, a drain, a node shutdown), and an exit 0 would make the kubelet call the pod
#: Succeeded, dropping its Evicted reason. 143 is how a shell reports a SIGTERM death.
POD_SIGTERM_EXIT = 128 + 15
#: Which run of which proc this is: a random id per process the local launcher starts, a pod's
#: UID on Kubernetes. Clients learn it with the address and name it in their handshake, and a
#: proc refuses one meant for another id (mesh_client/_src/wire/binding.py). Unset: the proc
#: draws its own, and only clients that meant no particular proc reach it.
INCARNATION = "PROCMESH_INCARNATION"


class ContractError(ValueError):
    """A ``PROCMESH_*`` variable is malformed; the message names it and the fix."""


@dataclasses.dataclass(frozen=True)
class ProcEnv:
    """The proc server's settings as they travel in its environment.

    ``listen_host`` None means "the pod's IP", rendered as a ``fieldRef`` by the operator.
    ``token`` and ``token_file`` are alternatives (a local proc gets the token, a pod the path of
    the mounted Secret); the token itself is read by the server, not here.
    """

    port: int = PROC_PORT
    listen_host: str | None = "127.0.0.1"
    token: str | None = dataclasses.field(default=None, repr=False)  # a repr may reach a log
    token_file: str | None = None
    mesh: str = ""
    rank: int = 0
    coords: Mapping[str, int] = dataclasses.field(default_factory=dict)
    memory_fraction: float | None = None
    max_message_bytes: int | None = None
    ready_fd: int | None = None
    lifeline: bool = False
    sys_path: tuple[str, ...] = ()
    max_unauthenticated: int | None = None
    handshake_timeout_seconds: float | None = None
    sigterm_exit: int = 0
    incarnation: str | None = None

    def render(self) -> dict[str, str]:
        """The variables, as strings (``listen_host`` None is left to the caller's fieldRef)."""
        env = {PORT: str(self.port), MESH: self.mesh, RANK: str(self.rank),
               COORDS: json.dumps(dict(self.coords), separators=(",", ":"))}
        if self.listen_host is not None:
            env[LISTEN_HOST] = self.listen_host
        if self.token is not None:
            env[TOKEN] = self.token
        if self.token_file is not None:
            env[TOKEN_FILE] = self.token_file
        if self.memory_fraction is not None:
            env[MEMORY_FRACTION] = repr(self.memory_fraction)
        if self.max_message_bytes is not None:
            env[MAX_MESSAGE_BYTES] = str(self.max_message_bytes)
        if self.ready_fd is not None:
            env[READY_FD] = str(self.ready_fd)
        if self.lifeline:
            env[LIFELINE] = "stdin"
        if self.sys_path:
            env[SYS_PATH] = json.dumps(list(self.sys_path))
        if self.max_unauthenticated is not None:
            env[MAX_UNAUTHENTICATED] = str(self.max_unauthenticated)
        if self.handshake_timeout_seconds is not None:
            env[HANDSHAKE_TIMEOUT_SECONDS] = repr(self.handshake_timeout_seconds)
        if self.sigterm_exit:
            env[SIGTERM_EXIT] = str(self.sigterm_exit)
        if self.incarnation is not None:
            env[INCARNATION] = self.incarnation
        return env


def parse_proc_env(env: Mapping[str, str]) -> ProcEnv:
    """Read :class:`ProcEnv` back; raise :class:`ContractError` naming the variable on bad input.

    Unset (or empty) variables take :class:`ProcEnv`'s defaults, so ``parse_proc_env(e.render())
    == e`` for every ``e`` whose ``listen_host`` is set.
    """
    port = _int(env, PORT, PROC_PORT)
    if not 0 <= port <= 65535:
        raise ContractError(f"{PORT}={port} is not a TCP port (0 picks a free one)")
    fraction = _float(env, MEMORY_FRACTION)
    if fraction is not None and not 0 < fraction <= 1:
        raise ContractError(f"{MEMORY_FRACTION}={env[MEMORY_FRACTION]} must be in (0, 1]")
    coords = _json(env, COORDS, {})
    if not isinstance(coords, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in coords.values()):
        raise ContractError(f"{COORDS}={env.get(COORDS)!r} is not a JSON object of integers")
    sys_path = _json(env, SYS_PATH, [])
    if not isinstance(sys_path, list) or not all(isinstance(p, str) for p in sys_path):
        raise ContractError(f"{SYS_PATH}={env.get(SYS_PATH)!r} is not a JSON list of paths")
    max_message_bytes = _int(env, MAX_MESSAGE_BYTES, None)
    if max_message_bytes is not None and max_message_bytes < MIN_MAX_MESSAGE_BYTES:
        raise ContractError(f"{MAX_MESSAGE_BYTES}={max_message_bytes} is below the least a proc may "
                            f"accept: give at least {MIN_MAX_MESSAGE_BYTES}")
    max_unauthenticated = _int(env, MAX_UNAUTHENTICATED, None)
    if max_unauthenticated is not None and max_unauthenticated < 1:
        raise ContractError(f"{MAX_UNAUTHENTICATED}={max_unauthenticated} must be at least 1, "
                            f"or no client could connect")
    handshake_timeout = _float(env, HANDSHAKE_TIMEOUT_SECONDS)
    if handshake_timeout is not None and not handshake_timeout > 0:
        raise ContractError(f"{HANDSHAKE_TIMEOUT_SECONDS}={env[HANDSHAKE_TIMEOUT_SECONDS]} "
                            f"must be positive")
    sigterm_exit = _int(env, SIGTERM_EXIT, 0)
    if not 0 <= sigterm_exit <= 255:
        raise ContractError(f"{SIGTERM_EXIT}={sigterm_exit} is not an exit status (0 to 255)")
    return ProcEnv(
        port=port,
        listen_host=env.get(LISTEN_HOST) or "127.0.0.1",
        token=env.get(TOKEN) or None,
        token_file=env.get(TOKEN_FILE) or None,
        mesh=env.get(MESH, ""),
        rank=_int(env, RANK, 0),
        coords={str(k): int(v) for k, v in coords.items()},
        memory_fraction=fraction,
        max_message_bytes=max_message_bytes,
        ready_fd=_int(env, READY_FD, None),
        lifeline=env.get(LIFELINE) == "stdin",
        sys_path=tuple(sys_path),
        max_unauthenticated=max_unauthenticated,
        handshake_timeout_seconds=handshake_timeout,
        sigterm_exit=sigterm_exit,
        incarnation=env.get(INCARNATION) or None,
    )


@typing.overload
def _int(env: Mapping[str, str], name: str, default: int) -> int: ...
@typing.overload
def _int(env: Mapping[str, str], name: str, default: None) -> int | None: ...
def _int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = env.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ContractError(f"{name}={value!r} is not an integer") from None


def _float(env: Mapping[str, str], name: str) -> float | None:
    value = env.get(name)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ContractError(f"{name}={value!r} is not a number") from None


def _json(env: Mapping[str, str], name: str, default: object) -> object:
    text = env.get(name)
    if not text:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ContractError(f"{name}={text!r} is not valid JSON") from None


# --- how a proc's pod ended, in the kubelet's words: the operator's Degraded/ProcFailed messages
# and events, the client's lost-proc stories and describe's LAST FAILURE say it alike. The
# container's termination says how the proc server ended; the pod's own reason and message say
# why when the kubelet ended it (Evicted), where the container says only "exit code 137, Error".

#: The kubelet's message is short; a longer one (a webhook's, say) is cut to this many characters.
MAX_POD_MESSAGE = 300


#: The reason the kubelet writes, with exit code 137, for a container whose end it did not see
#: (it marked the pod terminal before the runtime reported the container's end): the code is its
#: stand-in, not the proc's.
UNKNOWN_END = "ContainerStatusUnknown"


def pod_termination(term: Mapping[str, Any], exit_word: str = "exit code") -> str:
    """``exit code 137, signal 9, OOMKilled`` from a container's ``terminated`` state; for
    :data:`UNKNOWN_END`, a note that the code is not the proc's (a 137 reads as a kill)."""
    bits = [f"{exit_word} {term.get('exitCode')}"]
    if term.get("signal"):
        bits.append(f"signal {term['signal']}")
    if term.get("reason"):
        bits.append(str(term["reason"]))
    if term.get("reason") == UNKNOWN_END:
        bits.append("the kubelet's stand-in: it did not see the container end, so how the proc ended is unknown")
    return ", ".join(bits)


def pod_verdict(pod: Mapping[str, Any]) -> str:
    """``pod Evicted: <the kubelet's message>``, or "" when the pod's status gives no reason."""
    status = pod.get("status") or {}
    if not status.get("reason"):
        return ""
    message = " ".join(str(status.get("message") or "").split())
    if len(message) > MAX_POD_MESSAGE:
        message = message[:MAX_POD_MESSAGE] + " ..."
    return f"pod {status['reason']}" + (f": {message}" if message else "")
