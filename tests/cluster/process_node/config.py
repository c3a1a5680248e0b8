"""One process node's settings: resources, GPUs, addresses and restart back-off.

A frozen dataclass saved as JSON next to the node's files, so the launcher
(:mod:`tests.cluster.controlplane`) and the agent (:mod:`tests.cluster.process_node.agent`) agree.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class NodeConfig:
    """What a process node advertises and how it runs pods.

    ``index`` (unique on the machine: a slot of :mod:`.slots`, held by the running agent and
    assigned by the launcher when left at -1) picks the node's
    loopback address ``127.0.1.<index+1>`` and its pod range ``127.<index+10>.0.0/16``.
    ``gpus`` physical devices are backed by the host's CUDA devices ``host_gpus`` (default
    ``0..gpus-1``), each advertised ``gpu_replicas`` times (time-slicing) as ``gpu_resource``.
    """

    name: str
    index: int = -1
    cpu: str = "32"
    memory: str = "128Gi"
    pods: int = 110
    # Emulated NVIDIA device plugin and GPU Feature Discovery:
    gpus: int = 0
    gpu_replicas: int = 1
    gpu_resource: str = "nvidia.com/gpu"
    gpu_product: str = "NVIDIA-H200"
    gpu_memory_mib: int = 143771
    host_gpus: tuple[int, ...] | None = None
    # Emulated NVIDIA DRA GPU driver (process_node/dra.py): publish the GPUs as a ResourceSlice
    # of driver gpu.nvidia.com and expose the devices of allocated claims to their pods.
    dra: bool = False
    # Extra node labels and taints (taints as {key, value, effect} dicts):
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    # Container restart back-off: doubles from initial to max; the kubelet uses 10 s and 300 s.
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.host_gpus is not None:
            if self.gpus == 0:
                object.__setattr__(self, "gpus", len(self.host_gpus))
            elif self.gpus != len(self.host_gpus):
                raise ValueError(f"gpus={self.gpus} but host_gpus names {len(self.host_gpus)} devices")
        if self.gpu_replicas < 1:
            raise ValueError("gpu_replicas must be at least 1")

    @property
    def host_ip(self) -> str:
        return f"127.0.1.{self.index + 1}"

    @property
    def pod_cidr(self) -> str:
        return f"127.{self.index + 10}.0.0/16"

    @property
    def physical_gpus(self) -> tuple[int, ...]:
        """Host CUDA indices of this node's GPUs, in the node's device order."""
        if self.host_gpus is not None:
            return tuple(self.host_gpus)
        return tuple(range(self.gpus))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeConfig:
        data = dict(data)
        if data.get("host_gpus") is not None:
            data["host_gpus"] = tuple(data["host_gpus"])
        data["taints"] = tuple(data.get("taints", ()))
        return cls(**data)

    @classmethod
    def load(cls, path: Path) -> NodeConfig:
        return cls.from_dict(json.loads(path.read_text()))
