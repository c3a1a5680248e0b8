"""What GPU a proc sees, without importing torch unless the proc already did."""

from __future__ import annotations

import os
import sys


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


def apply_memory_fraction(fraction: float) -> None:
    """Cap this process's PyTorch allocator before any actor runs (no-op without CUDA)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(fraction)
    else:
        print(f"procmesh: PROCMESH_MEMORY_FRACTION={fraction} ignored: CUDA is not available", file=sys.stderr)
