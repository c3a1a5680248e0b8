"""GPU memory budget of one physical device, shared by procs of one or more meshes.

Memory fractions are cooperative caps on PyTorch's allocator, not isolation (DESIGN.md), so
the operator refuses placements that cannot fit: on every device, the sum of the fractions of
the procs there, times the device memory, plus one CUDA context per process, must not exceed the
device. A proc without a fraction may take the whole device and so must be alone on it.
Called by :mod:`.placing`; pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mesh_client._src import contract


@dataclasses.dataclass(frozen=True)
class DeviceUse:
    """One proc placed on a device: its pod name and memory fraction (None: uncapped)."""

    pod: str
    fraction: float | None


def overflow_mib(uses: Sequence[DeviceUse], memory_mib: int, context_mib: int) -> float:
    """By how many MiB ``uses`` exceed a device of ``memory_mib`` (<= 0 means they fit).

    An uncapped proc counts as the whole device, so it fits only alone (its own context comes
    out of the same memory, as it would at run time)."""
    if not uses:
        return float("-inf")
    if len(uses) == 1 and uses[0].fraction is None:
        return float("-inf")
    need = sum(memory_mib if u.fraction is None else u.fraction * memory_mib for u in uses)
    need += len(uses) * context_mib
    return need - memory_mib


def overrun_reason(uses: Sequence[DeviceUse], memory_mib: int, context_mib: int,
                   staying: Sequence[str]) -> str:
    """Why a device cannot take ``uses``: a wait (:data:`contract.WAITING_FOR_GPU_BUDGET`)
    when the procs that stay as long as the mesh does (those of the meshes named in
    ``staying``: the mesh itself and the one it is colocated with) fit on their own, since the
    others free room as they end; else a refusal that no wait clears
    (:data:`contract.BUDGET_EXCEEDED`)."""
    fixed = [u for u in uses
             if any(contract.rank_of_pod_name(mesh, u.pod) is not None for mesh in staying)]
    if overflow_mib(fixed, memory_mib, context_mib) <= 0:
        return contract.WAITING_FOR_GPU_BUDGET
    return contract.BUDGET_EXCEEDED


def explain_overrun(device: str, node: str, uses: Sequence[DeviceUse], memory_mib: int,
             context_mib: int, staying: Sequence[str]) -> str:
    """A message that names every proc on the device, the arithmetic that failed, and what
    clears it (``staying`` as for :func:`overrun_reason`)."""
    parts = ", ".join(f"{u.pod}={'uncapped' if u.fraction is None else f'{u.fraction:g}'}"
                      for u in uses)
    total = sum(1.0 if u.fraction is None else u.fraction for u in uses)
    return (f"GPU {device} on node {node} ({memory_mib} MiB) would hold {len(uses)} procs "
            f"({parts}): fractions sum to {total:g} of the device plus {len(uses)} x "
            f"{context_mib} MiB of CUDA context, {overflow_mib(uses, memory_mib, context_mib):.0f} "
            f"MiB more than it has; " + (
                "this mesh is placed once other procs leave the device"
                if overrun_reason(uses, memory_mib, context_mib, staying)
                == contract.WAITING_FOR_GPU_BUDGET
                else "delete the mesh and create it again with a lower spec.gpus.memoryFraction "
                     "or other devices (gpus cannot change once a mesh exists)"))
