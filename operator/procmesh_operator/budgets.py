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


def explain_overrun(device: str, node: str, uses: Sequence[DeviceUse], memory_mib: int,
             context_mib: int) -> str:
    """A message that names every proc on the device and the arithmetic that failed."""
    parts = ", ".join(f"{u.pod}={'uncapped' if u.fraction is None else f'{u.fraction:g}'}"
                      for u in uses)
    total = sum(1.0 if u.fraction is None else u.fraction for u in uses)
    return (f"GPU {device} on node {node} ({memory_mib} MiB) would hold {len(uses)} procs "
            f"({parts}): fractions sum to {total:g} of the device plus {len(uses)} x "
            f"{context_mib} MiB of CUDA context, {overflow_mib(uses, memory_mib, context_mib):.0f} "
            f"MiB more than it has; lower spec.gpus.memoryFraction or use other devices")
