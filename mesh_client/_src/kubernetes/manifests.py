"""The ProcMesh manifest that ``spawn_procs`` creates, built from its arguments (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from mesh_client._src import contract


class GpusSpec(TypedDict, total=False):
    """A ProcMesh's ``spec.gpus``, as the CRD spells it (crds/procmesh.yaml)."""

    mode: str  # one of contract.GPU_MODES
    deviceIDs: list[int | str]
    resourceName: str
    memoryFraction: float


# What ``spawn_procs(gpus=...)`` takes: nothing, a mode, device IDs (pinned) or the spec itself.
GpuRequest = Literal["plugin", "pinned"] | Sequence[int | str] | GpusSpec | None


def gpus_spec(gpus: GpuRequest, memory_fraction: float | None) -> dict[str, Any]:
    """``None`` → no GPUs; ``"plugin"`` or ``{"mode": ...}``; a list of device IDs → pinned."""
    if gpus is None:
        spec: dict[str, Any] = {"mode": contract.GPU_MODE_NONE}
    elif gpus == contract.GPU_MODE_PLUGIN:
        spec = {"mode": contract.GPU_MODE_PLUGIN}
    elif gpus == contract.GPU_MODE_PINNED:
        spec = {"mode": contract.GPU_MODE_PINNED}  # device IDs inherited through colocate_with
    elif isinstance(gpus, Mapping):
        spec = dict(gpus)
    elif isinstance(gpus, Sequence) and not isinstance(gpus, str):
        spec = {"mode": contract.GPU_MODE_PINNED, "deviceIDs": [d if isinstance(d, str) else int(d) for d in gpus]}
    else:
        raise ValueError(
            f"gpus={gpus!r}: give None (no GPUs), 'plugin', 'pinned' (with colocate_with), "
            f"a list of device IDs, or a dict like the ProcMesh spec.gpus"
        )
    if memory_fraction is not None:
        spec["memoryFraction"] = memory_fraction
    return spec


def proc_mesh_manifest(
    name: str,
    *,
    hosts: int,
    per_host: Mapping[str, int],
    gpus: GpuRequest = None,
    memory_fraction: float | None = None,
    colocate_with: str | None = None,
    template: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
    max_restarts: int | None = None,
    port: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    if contract.HOSTS_DIM in per_host:
        raise ValueError(f"per_host cannot have a '{contract.HOSTS_DIM}' dimension: the host mesh has it already")
    spec: dict[str, Any] = {
        contract.HOSTS_DIM: hosts,
        "perHost": [{"name": k, "size": int(v)} for k, v in per_host.items()],
        "gpus": gpus_spec(gpus, memory_fraction),
    }
    if colocate_with:
        spec["colocateWith"] = colocate_with
    if template:
        spec["template"] = dict(template)
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if max_restarts is not None:
        spec["maxRestarts"] = max_restarts
    if port is not None:
        spec["port"] = port
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": contract.API_VERSION, "kind": contract.KIND, "metadata": metadata, "spec": spec}
