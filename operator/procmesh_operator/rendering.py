"""Pure builders for the children of a ProcMesh: token Secret, access Role, headless Service,
proc pods.

Like KubeRay's ``BuildPod``: every function returns a plain dict and never calls the API; flags
come in as :class:`~procmesh_operator.settings.Settings`. :mod:`.reconciling` creates what these
return; names and labels come from :mod:`.names`; where a pod runs and which device it names
comes from :mod:`.placing` as a :class:`ProcPlacement`.

The pod runs the proc server (``python -m mesh_client.proc_server``) with the PROCMESH_* env
contract of mesh_client: bound to the pod IP, token read from the mounted Secret.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import secrets
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import claims, losses, names, specs, spreading, tolerations
from procmesh_operator import settings as settings_

PROC_SERVER_COMMAND = ["python", "-m", "mesh_client.proc_server"]
#: The proc server binds the pod's IP, which only the kubelet knows: a downward-API fieldRef.
POD_IP_FIELD = "status.podIP"
#: A pod's proc is this incarnation of its rank (contract.INCARNATION): the pod's UID, which the
#: operator publishes as status.procs[].podUID and clients name in their handshakes.
POD_UID_FIELD = "metadata.uid"

#: GPU Feature Discovery label present on nodes with NVIDIA GPUs (plugin mode's node affinity).
GFD_PRESENT_LABEL = "nvidia.com/gpu.present"


@dataclasses.dataclass(frozen=True)
class ProcPlacement:
    """Where one proc goes, as decided by :mod:`.placing`: a node (or the scheduler's choice)
    and, in pinned mode, the physical device the proc must see."""

    node: str | None = None
    device: str | None = None


def owner_reference(mesh: specs.MeshSpec) -> dict[str, Any]:
    """The controller owner reference that lets garbage collection delete the children."""
    return {**contract.owner_reference(mesh.name, mesh.uid), "controller": True, "blockOwnerDeletion": True}


def _metadata(mesh: specs.MeshSpec, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": mesh.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(mesh)],
    }


def new_token() -> str:
    """A fresh random mesh token (64 hex characters)."""
    return secrets.token_hex(32)


def render_secret(mesh: specs.MeshSpec, token: str, name: str | None = None) -> dict[str, Any]:
    """The per-mesh token Secret. ``token`` is passed in, so rendering stays deterministic;
    :mod:`.token_secrets` creates it and never updates it. ``name`` None: a name the API server
    generates (``<mesh>-token-<random>``, :func:`contract.secret_name_prefix`), so that no one
    can have made that Secret first; else that name (a recorded one, created again)."""
    metadata = _metadata(mesh, name or "", names.mesh_labels(mesh.name))
    if name is None:
        del metadata["name"]
        metadata["generateName"] = contract.secret_name_prefix(mesh.name)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {contract.TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def render_access_role(mesh: specs.MeshSpec) -> dict[str, Any]:
    """The Role that grants use of this mesh and nothing else: get (and watch) this ProcMesh,
    get its token Secret. Inert until an admin binds it (``procmesh grant <mesh> --user=...``, a
    RoleBinding owned by the mesh, so it goes with it); the operator never binds anything."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(mesh, contract.access_role_name(mesh.name),
                              names.mesh_labels(mesh.name)),
        "rules": [
            {"apiGroups": [contract.GROUP], "resources": [contract.PLURAL],
             "resourceNames": [mesh.name], "verbs": ["get", "watch"]},
            {"apiGroups": [""], "resources": ["secrets"],
             "resourceNames": [mesh.token_secret], "verbs": ["get"]},
        ],
    }


def render_service(mesh: specs.MeshSpec) -> dict[str, Any]:
    """The headless Service: DNS names for every proc, published before they are ready so peers
    can resolve each other while starting (jobset#504, lws#85)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(mesh, contract.service_name(mesh.name), names.mesh_labels(mesh.name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.mesh_selector(mesh.name),
            "ports": [{"name": contract.PORT_NAME, "port": mesh.port, "targetPort": mesh.port,
                       "protocol": "TCP"}],
        },
    }


def pod_labels(mesh: specs.MeshSpec, rank: int) -> dict[str, str]:
    """User template labels, then ours (ours win): mesh, rank and one label per coordinate."""
    labels = {str(k): str(v) for k, v in (mesh.template.get("labels") or {}).items()}
    labels.update(names.mesh_labels(mesh.name))
    labels[contract.RANK_LABEL] = str(rank)
    for dim, index in mesh.shape.coords(rank).items():
        labels[contract.coord_label(dim)] = str(index)
    return labels


def proc_env(mesh: specs.MeshSpec, rank: int, placement: ProcPlacement) -> list[dict[str, Any]]:
    """The proc server's env contract (PROCMESH_*, rendered by :class:`contract.ProcEnv`; the
    listen host is the pod IP, by fieldRef) plus the GPU visibility variables."""
    fraction = mesh.gpus.memory_fraction if mesh.gpus.mode != contract.GPU_MODE_NONE else None
    rendered = contract.ProcEnv(
        port=mesh.port, listen_host=None, token_file=names.TOKEN_PATH, mesh=mesh.name,
        rank=rank, coords=mesh.shape.coords(rank), memory_fraction=fraction,
        sigterm_exit=contract.POD_SIGTERM_EXIT).render()
    env: list[dict[str, Any]] = [
        {"name": contract.LISTEN_HOST,
         "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": POD_IP_FIELD}}},
        {"name": contract.INCARNATION,
         "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": POD_UID_FIELD}}},
        *({"name": name, "value": value} for name, value in rendered.items()),
    ]
    if mesh.gpus.mode == contract.GPU_MODE_PINNED:
        # The runtime mounts exactly this physical GPU; inside, it is renumbered to 0 (DESIGN.md).
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": str(placement.device)})
        env.append({"name": "CUDA_VISIBLE_DEVICES", "value": "0"})
    elif mesh.gpus.mode == contract.GPU_MODE_NONE:
        # Without a request the NVIDIA runtime may expose every GPU (k8s-device-plugin#1605).
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    return env


def _merged_env(mesh: specs.MeshSpec, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User env first, minus any variable we set, then ours: the contract cannot be overridden."""
    taken = {e["name"] for e in ours}
    user = [copy.deepcopy(e) for e in mesh.template.get("env") or [] if e.get("name") not in taken]
    return user + ours


def _resources(mesh: specs.MeshSpec, rank: int) -> dict[str, Any]:
    resources = copy.deepcopy(dict(mesh.template.get("resources") or {}))
    if mesh.gpus.mode == contract.GPU_MODE_DRA:
        # The device comes through the claim's request (the driver's CDI spec), not our env.
        resources["claims"] = claims.pod_claims(mesh, rank)[1]
    if mesh.gpus.mode == contract.GPU_MODE_PLUGIN:
        # One unit of the (usually time-sliced) GPU resource; the device plugin picks the device.
        name = mesh.gpus.resource_name
        resources.setdefault("limits", {})[name] = 1
        if name in (resources.get("requests") or {}):
            resources["requests"][name] = 1
    return resources


def _node_affinity_terms(terms: list[dict[str, Any]], extra: dict[str, Any]) -> list[dict[str, Any]]:
    """AND ``extra`` (matchExpressions / matchFields) into every user term (terms are ORed)."""
    if not terms:
        terms = [{}]
    out = []
    for term in terms:
        term = copy.deepcopy(term)
        for key, items in extra.items():
            term[key] = list(term.get(key) or []) + items
        out.append(term)
    return out


def _affinity(mesh: specs.MeshSpec, rank: int, placement: ProcPlacement) -> dict[str, Any] | None:
    affinity = copy.deepcopy(dict(mesh.template.get("affinity") or {}))
    spreading.merge_into(affinity, spreading.pod_affinity(mesh, rank))  # hosts are machines
    extra: dict[str, Any] = {}
    if mesh.gpus.mode == contract.GPU_MODE_PLUGIN:
        extra["matchExpressions"] = [
            {"key": GFD_PRESENT_LABEL, "operator": "In", "values": ["true"]}]
    if placement.node is not None:
        # Like a DaemonSet: the scheduler still checks fit, but only this node qualifies.
        extra["matchFields"] = [
            {"key": "metadata.name", "operator": "In", "values": [placement.node]}]
    if extra:
        node_affinity = affinity.setdefault("nodeAffinity", {})
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        required["nodeSelectorTerms"] = _node_affinity_terms(
            required.get("nodeSelectorTerms") or [], extra)
    return affinity or None


def node_loss_tolerations(own: list[dict[str, Any]], seconds: int
                           ) -> tuple[list[dict[str, Any]], str | None]:
    """``own`` plus a NoExecute toleration without end for each node-loss taint it does not
    cover, and the :data:`names.NODE_LOSS_ANNOTATION` value that gives those ``seconds``: the
    operator, not the taint eviction controller, counts them, so that a control-plane outage
    evicts nothing (:mod:`.losses`), and procs on a lost node are restarted after ``seconds``
    instead of Kubernetes' default 300."""
    out = list(own)
    added = []
    for key in names.NODE_LOSS_TAINTS:
        # One of the template's that tolerates it (a keyless Exists: every taint) is the user's
        # choice; one that does not (another effect, a value) leaves it to the operator.
        lost = losses.node_loss_taint(key)
        if not any(tolerations.tolerates(t, lost) for t in own):
            out.append({"key": key, "operator": "Exists", "effect": "NoExecute"})
            added.append(f"{key}={seconds}")
    return out, ",".join(added) or None


def pod_tolerations(mesh: specs.MeshSpec, settings: settings_.Settings
                    ) -> tuple[list[dict[str, Any]], str | None]:
    """The tolerations of every pod of ``mesh``, as :func:`node_loss_tolerations` returns them:
    the template's (with those of a Kueue admission's flavors,
    :func:`procmesh_operator.workloads.with_flavors`) and the operator's. Pinned placement
    judges nodes' taints by these: the ones the pods will carry."""
    own = copy.deepcopy(list(mesh.template.get("tolerations") or []))
    return node_loss_tolerations(own, settings.node_loss_toleration_seconds)


def security_contexts(template: Mapping[str, Any], default_image_non_root: bool = True,
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's securityContext: Pod Security "restricted" unless the
    template says otherwise. The proc server needs no capability, no privilege escalation and
    no syscall outside the runtime's default profile; runAsNonRoot is the operator's word only
    for its default image, and only while the operator is told it runs as another user than
    root (ours runs as user 10001; an image of the user's, or a platform's default image, may
    run as root). Each field the template sets replaces the operator's; ``capabilities.add``
    alone keeps ``drop: [ALL]``."""
    pod: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if not template.get("image") and default_image_non_root:
        pod["runAsNonRoot"] = True
    pod.update(copy.deepcopy(template.get("securityContext") or {}))
    own = copy.deepcopy(template.get("containerSecurityContext") or {})
    # capabilities.add alone keeps drop ALL (restricted's way to add NET_BIND_SERVICE).
    capabilities = {"drop": ["ALL"], **(own.pop("capabilities", None) or {})}
    container: dict[str, Any] = {"capabilities": capabilities}
    # The Pod API refuses no escalation with privileged or with CAP_SYS_ADMIN.
    if not own.get("privileged") and not {"SYS_ADMIN", "CAP_SYS_ADMIN"} & set(
            capabilities.get("add") or []):
        container["allowPrivilegeEscalation"] = False
    container.update(own)
    return pod, container


def render_pod(mesh: specs.MeshSpec, rank: int, placement: ProcPlacement,
               settings: settings_.Settings) -> dict[str, Any]:
    """The pod of the proc at ``rank``: the proc server container, env, probe, token volume."""
    template = mesh.template
    name = contract.pod_name(mesh.name, rank)
    annotations = {str(k): str(v) for k, v in (template.get("annotations") or {}).items()
                   if k != names.RESTART_COUNTED_ANNOTATION}  # only a failure marks a pod
    annotations[contract.GENERATION_ANNOTATION] = str(mesh.generation)
    if placement.device is not None:
        annotations[contract.GPU_DEVICE_ANNOTATION] = placement.device
    if placement.node is not None:
        annotations[contract.NODE_ANNOTATION] = placement.node
    if mesh.gpus.memory_fraction is not None and mesh.gpus.mode != contract.GPU_MODE_NONE:
        annotations[contract.MEMORY_FRACTION_ANNOTATION] = repr(mesh.gpus.memory_fraction)
    container: dict[str, Any] = {
        "name": contract.CONTAINER_NAME,
        "image": template.get("image") or settings.default_image,
        "command": list(PROC_SERVER_COMMAND),
        "env": _merged_env(mesh, proc_env(mesh, rank, placement)),
        "ports": [{"name": contract.PORT_NAME, "containerPort": mesh.port, "protocol": "TCP"}],
        "readinessProbe": {
            "tcpSocket": {"port": mesh.port},
            "periodSeconds": settings.readiness_period_seconds,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": names.TOKEN_VOLUME, "mountPath": names.TOKEN_DIR,
                          "readOnly": True}],
    }
    if template.get("imagePullPolicy"):
        container["imagePullPolicy"] = template["imagePullPolicy"]
    pod_security, container["securityContext"] = security_contexts(template, settings.default_image_non_root)
    resources = _resources(mesh, rank)
    if resources:
        container["resources"] = resources
    pod_spec: dict[str, Any] = {
        "hostname": name,
        "subdomain": contract.service_name(mesh.name),
        # The operator owns restarts (spec.restartPolicy); a kubelet restart in place would hide
        # the failure and silently drop the proc's actors.
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": settings.termination_grace_period_seconds,
        "securityContext": pod_security,
        "containers": [container],
        # The proc server never calls the API: no token unless the template asks (issue 12).
        "automountServiceAccountToken": bool(template.get("automountServiceAccountToken", False)),
        "volumes": [{"name": names.TOKEN_VOLUME, "secret": {
            "secretName": mesh.token_secret,
            "items": [{"key": contract.TOKEN_KEY, "path": contract.TOKEN_KEY}],
            "defaultMode": 0o440,
        }}],
    }
    if mesh.gpus.mode == contract.GPU_MODE_DRA:
        pod_spec["resourceClaims"] = claims.pod_claims(mesh, rank)[0]
    for field in ("nodeSelector", "schedulerName", "serviceAccountName", "priorityClassName"):
        if template.get(field):
            pod_spec[field] = copy.deepcopy(template[field])
    pod_spec["tolerations"], counted = pod_tolerations(mesh, settings)
    if counted:
        annotations[names.NODE_LOSS_ANNOTATION] = counted
    affinity = _affinity(mesh, rank, placement)
    if affinity:
        pod_spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**_metadata(mesh, name, pod_labels(mesh, rank)), "annotations": annotations},
        "spec": pod_spec,
    }
