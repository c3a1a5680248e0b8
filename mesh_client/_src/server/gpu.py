"""What GPU a proc sees, without importing torch unless the proc already did."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from mesh_client._src import contract

if TYPE_CHECKING:
    from mesh_client._src.runtime.identifying import GpuMemory


def visible_gpu() -> str | None:
    """The UUID torch reports for device 0 if torch is loaded and has CUDA, else the env's pick."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return "GPU-" + str(torch.cuda.get_device_properties(0).uuid).removeprefix("GPU-")
        except Exception:
            pass
    for var in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(var)
        if value:
            return value
    return None


def memory() -> GpuMemory | None:
    """Device 0's memory as this proc's PyTorch allocator sees it (bytes), and the cap that
    ``set_per_process_memory_fraction`` put on it: for ``procmesh top``. None unless torch is
    already loaded and has CUDA (asking must not import torch into a proc that never used it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        total = int(torch.cuda.get_device_properties(0).total_memory)
        getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch 2.8+
        if getter is not None:
            fraction: float | None = float(getter(0))  # whoever set it: env or a bootstrap
        else:
            env = os.environ.get(contract.MEMORY_FRACTION)
            fraction = float(env) if env else None
        return {"allocated": int(torch.cuda.memory_allocated(0)),
                "reserved": int(torch.cuda.memory_reserved(0)),
                "total": total,
                "cap": int(total * fraction) if fraction is not None else total}
    except Exception:
        return None


def apply_memory_fraction(fraction: float) -> None:
    """Cap this process's PyTorch allocator before any actor runs (no-op without CUDA)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(fraction)
    else:
        print(f"procmesh: PROCMESH_MEMORY_FRACTION={fraction} ignored: CUDA is not available", file=sys.stderr)
