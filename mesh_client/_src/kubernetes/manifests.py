"""The ProcMesh manifest that ``spawn_procs`` creates, built from its arguments (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from mesh_client._src import contract


class GpuSharing(TypedDict, total=False):
    """``spec.gpus.sharing`` in dra mode: the NVIDIA driver's sharing strategy for a claim."""

    strategy: str
    interval: str


class GpusSpec(TypedDict, total=False):
    """A ProcMesh's ``spec.gpus``, as the CRD spells it (crds/procmesh.yaml)."""

    mode: str  # one of contract.GPU_MODES
    deviceIDs: list[int | str]
    resourceName: str
    memoryFraction: float
    deviceClassName: str
    selectors: list[str]
    sharing: GpuSharing


# What ``spawn_procs(gpus=...)`` takes: nothing, a mode, device IDs (pinned) or the spec itself.
GpuRequest = Literal["plugin", "pinned", "dra"] | Sequence[int | str] | GpusSpec | None


def gpus_spec(gpus: GpuRequest, memory_fraction: float | None, *, device_class: str | None = None,
              colocated: bool = False) -> dict[str, Any]:
    """``None`` → no GPUs; ``"plugin"``, ``"dra"`` or ``{"mode": ...}``; a list of device IDs →
    pinned. ``"dra"`` names ``device_class`` (default the NVIDIA driver's), unless ``colocated``:
    a colocated dra mesh uses its partner's claims."""
    if gpus is None:
        spec: dict[str, Any] = {"mode": contract.GPU_MODE_NONE}
    elif gpus == contract.GPU_MODE_PLUGIN:
        spec = {"mode": contract.GPU_MODE_PLUGIN}
    elif gpus == contract.GPU_MODE_PINNED:
        spec = {"mode": contract.GPU_MODE_PINNED}  # device IDs inherited through colocate_with
    elif gpus == contract.GPU_MODE_DRA:
        spec = {"mode": contract.GPU_MODE_DRA}
        if not colocated:
            spec["deviceClassName"] = device_class or contract.DEFAULT_DEVICE_CLASS
    elif isinstance(gpus, Mapping):
        spec = dict(gpus)
    elif isinstance(gpus, Sequence) and not isinstance(gpus, str):
        spec = {"mode": contract.GPU_MODE_PINNED, "deviceIDs": [d if isinstance(d, str) else int(d) for d in gpus]}
    else:
        raise ValueError(
            f"gpus={gpus!r}: give None (no GPUs), 'plugin', 'dra', 'pinned' (with colocate_with), "
            f"a list of device IDs, or a dict like the ProcMesh spec.gpus"
        )
    if device_class is not None and spec.get("mode") != contract.GPU_MODE_DRA:
        raise ValueError(f"device_class={device_class!r} is only meaningful with gpus='dra'")
    if memory_fraction is not None:
        spec["memoryFraction"] = memory_fraction
    return spec


def _whole_or_string_amounts(template: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with each fractional resource amount as a string (0.5 -> "0.5"): the CRD
    takes amounts as whole numbers or quantity strings, so that it can check them at apply."""
    out = dict(template)
    resources = template.get("resources")
    if isinstance(resources, Mapping):
        out["resources"] = {
            kind: ({name: str(amount) if isinstance(amount, float) else amount for name, amount in amounts.items()}
                   if isinstance(amounts, Mapping) else amounts)
            for kind, amounts in resources.items()
        }
    return out


def proc_mesh_manifest(
    name: str,
    *,
    hosts: int,
    per_host: Mapping[str, int],
    gpus: GpuRequest = None,
    memory_fraction: float | None = None,
    device_class: str | None = None,
    colocate_with: str | None = None,
    template: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
    max_restarts: int | None = None,
    port: int | None = None,
    labels: Mapping[str, str] | None = None,
    lease_seconds: int | None = None,
    owner: Mapping[str, Any] | None = None,
    host_placement: str | None = None,
) -> dict[str, Any]:
    """The ProcMesh body. An empty ``per_host`` is one proc per host (``perHost: []``, extent
    ``{hosts: N}``, as Monarch's ``spawn_procs()``). ``lease_seconds``: ``spec.lease`` (the
    creator renews it); ``owner``: an owner reference (the creator's pod), so the mesh goes with it;
    ``host_placement``: ``spec.placement.hosts`` (None: the CRD's default, DistinctNodes)."""
    if contract.HOSTS_DIM in per_host:
        raise ValueError(f"per_host cannot have a '{contract.HOSTS_DIM}' dimension: the host mesh has it already")
    spec: dict[str, Any] = {
        contract.HOSTS_DIM: hosts,
        "perHost": [{"name": k, "size": int(v)} for k, v in per_host.items()],
        "gpus": gpus_spec(gpus, memory_fraction, device_class=device_class,
                          colocated=bool(colocate_with)),
    }
    if colocate_with:
        spec["colocateWith"] = colocate_with
    if template:
        spec["template"] = _whole_or_string_amounts(template)
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if max_restarts is not None:
        spec["maxRestarts"] = max_restarts
    if port is not None:
        spec["port"] = port
    if lease_seconds is not None:
        spec["lease"] = {"durationSeconds": int(lease_seconds)}
    if host_placement is not None:
        if host_placement not in contract.HOST_PLACEMENTS:
            raise ValueError(f"host_placement={host_placement!r}: give one of "
                             f"{', '.join(contract.HOST_PLACEMENTS)}")
        spec["placement"] = {"hosts": host_placement}
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    return {"apiVersion": contract.API_VERSION, "kind": contract.KIND, "metadata": metadata, "spec": spec}
