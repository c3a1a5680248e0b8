"""Actors for the GPU tests: they report what device they see and how much memory they hold."""

import os

import torch

from mesh_client import Actor, default_bootstrap_cmd, endpoint


def on_gpus(device_ids):
    """Coordinate gpus=i sees physical GPU device_ids[i] (nvidia-smi's numbering) as cuda:0."""
    base = default_bootstrap_cmd().with_env({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})

    def command(point):
        return base.with_env({"CUDA_VISIBLE_DEVICES": str(device_ids[point["gpus"]])})

    return command


class Role(Actor):
    def __init__(self, megabytes: int = 64):
        self.resident = torch.empty(megabytes << 20, dtype=torch.uint8, device="cuda")
        self.extra = []

    @endpoint
    def device(self) -> dict:
        props = torch.cuda.get_device_properties(0)
        return {
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "count": torch.cuda.device_count(),
            "uuid": "GPU-" + str(props.uuid).removeprefix("GPU-"),
            "total": props.total_memory,
        }

    @endpoint
    def memory(self) -> dict:
        return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}

    @endpoint
    def allocate(self, fraction_of_device: float) -> int:
        """Try to hold this fraction of the whole device more; OOMs past the cap."""
        nbytes = int(torch.cuda.get_device_properties(0).total_memory * fraction_of_device)
        self.extra.append(torch.empty(nbytes, dtype=torch.uint8, device="cuda"))
        return torch.cuda.memory_allocated()

    @endpoint
    def release(self, empty_cache: bool = True) -> dict:
        self.extra.clear()
        if empty_cache:
            torch.cuda.empty_cache()
        return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}

    @endpoint
    def work(self, n: int = 2048) -> float:
        a = torch.randn(n, n, device="cuda")
        return (a @ a).float().norm().item()
