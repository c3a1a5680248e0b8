"""The ProcMesh spec as typed, defaulted values, parsed from the resource body (and the one
status fact the operator acts on: the token Secret it recorded).

The API server applies the CRD's schema defaults, but the pure functions must not trust that
(unit tests and objects created before a default existed), so every default is repeated here and
matches ``crds/procmesh.yaml``. Read by :mod:`.rendering`, :mod:`.placing`, :mod:`.planning`
and :mod:`.statuses`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import dimensions
from procmesh_operator import settings as settings_

NEVER = contract.RESTART_NEVER
RESTART_PROC = contract.RESTART_PROC
RESTART_MESH = contract.RESTART_MESH


@dataclasses.dataclass(frozen=True)
class GPUs:
    mode: str = contract.GPU_MODE_NONE
    device_ids: tuple[str, ...] | None = None
    resource_name: str = settings_.DEFAULT_GPU_RESOURCE
    memory_fraction: float | None = None
    # dra mode (a colocated mesh leaves them unset: it uses its partner's claims):
    device_class_name: str = contract.DEFAULT_DEVICE_CLASS
    selectors: tuple[str, ...] = ()
    sharing_strategy: str | None = None  # TimeSlicing | MPS; None: no driver config
    sharing_interval: str | None = None  # TimeSlicing only


@dataclasses.dataclass(frozen=True)
class MeshSpec:
    """One ProcMesh: identity (name, namespace, uid, generation) and its spec with defaults."""

    name: str
    namespace: str
    uid: str
    generation: int
    shape: dimensions.Dimensions
    gpus: GPUs
    colocate_with: str | None
    template: Mapping[str, Any]
    restart_policy: str
    max_restarts: int
    suspend: bool
    port: int
    token_secret_name: str | None = None  # spec.tokenSecretName: the creator made the Secret
    #: status.tokenSecretName: the Secret the operator created (token_secrets.py), as recorded.
    recorded_token_secret_name: str | None = None
    lease_seconds: int | None = None  # spec.lease.durationSeconds: deleted when not renewed
    lease_renewal: str | None = None  # the holder's last renewal (contract.LEASE_RENEW_ANNOTATION)
    host_placement: str = contract.HOSTS_ON_DISTINCT_NODES  # spec.placement.hosts

    @property
    def hosts_on_distinct_nodes(self) -> bool:
        """Whether every host of this mesh is a node of its own (spec.placement.hosts)."""
        return self.host_placement == contract.HOSTS_ON_DISTINCT_NODES

    @property
    def token_secret(self) -> str:
        """The token Secret's name: the creator's (spec.tokenSecretName), else the operator's
        as recorded in status, else the legacy ``<mesh>-token`` (ValueError: the status names a
        Secret the operator never makes; :mod:`.token_secrets` refuses such a mesh first)."""
        return contract.token_secret_name(self.name, self.token_secret_name,
                                          self.recorded_token_secret_name)

    @property
    def size(self) -> int:
        return self.shape.size


def parse(body: Mapping[str, Any]) -> MeshSpec:
    """Read a ProcMesh body (a dict as the API returns it) into a :class:`MeshSpec`."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    per_host = [(str(d["name"]), int(d["size"])) for d in spec.get("perHost") or []]
    gpus = spec.get("gpus") or {}
    raw_ids = gpus.get("deviceIDs")
    fraction = gpus.get("memoryFraction")
    sharing = gpus.get("sharing") or {}
    return MeshSpec(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "default")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 0),
        shape=dimensions.mesh_dimensions(int(spec.get(contract.HOSTS_DIM, 1)), per_host),
        gpus=GPUs(
            mode=str(gpus.get("mode", contract.GPU_MODE_NONE)),
            device_ids=None if raw_ids is None else tuple(str(x) for x in raw_ids),
            resource_name=str(gpus.get("resourceName") or settings_.DEFAULT_GPU_RESOURCE),
            memory_fraction=None if fraction is None else float(fraction),
            device_class_name=str(gpus.get("deviceClassName") or contract.DEFAULT_DEVICE_CLASS),
            selectors=tuple(str(x) for x in gpus.get("selectors") or ()),
            sharing_strategy=sharing.get("strategy") or None,
            sharing_interval=sharing.get("interval") or None,
        ),
        colocate_with=spec.get("colocateWith") or None,
        template=spec.get("template") or {},
        restart_policy=str(spec.get("restartPolicy", contract.DEFAULT_RESTART_POLICY)),
        max_restarts=int(spec.get("maxRestarts", contract.DEFAULT_MAX_RESTARTS)),
        suspend=bool(spec.get("suspend", False)),
        port=int(spec.get("port", contract.PROC_PORT)),
        token_secret_name=spec.get("tokenSecretName") or None,
        recorded_token_secret_name=(body.get("status") or {}).get(
            contract.TOKEN_SECRET_STATUS_FIELD) or None,
        lease_seconds=_lease_seconds(spec),
        lease_renewal=(meta.get("annotations") or {}).get(contract.LEASE_RENEW_ANNOTATION),
        host_placement=str((spec.get("placement") or {}).get(
            "hosts", contract.HOSTS_ON_DISTINCT_NODES)),
    )


def _lease_seconds(spec: Mapping[str, Any]) -> int | None:
    lease = spec.get("lease") or {}
    seconds = lease.get("durationSeconds")
    return None if seconds is None else int(seconds)
