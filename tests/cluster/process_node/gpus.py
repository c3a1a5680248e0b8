"""GPUs as the NVIDIA device plugin and container runtime present them, on one node.

:class:`Allocator` is the device plugin: each unit of the node's GPU resource a container asks for
is served by the least-used physical GPU (time-slicing replicas counted), and the container gets
``NVIDIA_VISIBLE_DEVICES=<uuids>``. :func:`host_cuda_visible_devices` is the runtime: the devices
named by ``NVIDIA_VISIBLE_DEVICES`` become visible renumbered from 0 in PCI bus order, and the
pod's own ``CUDA_VISIBLE_DEVICES`` selects among those; the result is expressed as the host's
``CUDA_VISIBLE_DEVICES`` so that, on a GPU machine, the process really sees only those devices.
Used by :mod:`.pods`.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import threading
import uuid

from tests.cluster.process_node.config import NodeConfig


@dataclasses.dataclass(frozen=True)
class Device:
    """One physical GPU of the node: its node index, UUID and host CUDA index (PCI order)."""

    index: int
    uuid: str
    host_index: int


class DeviceError(ValueError):
    """NVIDIA_VISIBLE_DEVICES names a device the node does not have (the runtime refuses)."""


def _host_uuids() -> dict[int, str]:
    """Real GPU UUIDs by host index when nvidia-smi answers; empty on a CPU machine."""
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        index, _, gpu_uuid = line.partition(",")
        if index.strip().isdigit():
            found[int(index)] = gpu_uuid.strip()
    return found


def devices(config: NodeConfig, real_uuids: dict[int, str] | None = None) -> list[Device]:
    """The node's devices; UUIDs are the real ones where known, stable made-up ones otherwise."""
    real = _host_uuids() if real_uuids is None else real_uuids
    return [
        Device(i, real.get(host, f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'procmesh/{config.name}/{i}')}"), host)
        for i, host in enumerate(config.physical_gpus)
    ]


class Allocator:
    """The device plugin's bookkeeping: which container holds which replica of which GPU."""

    def __init__(self, node_devices: list[Device], replicas: int) -> None:
        self.devices = node_devices
        self.replicas = replicas
        self._held: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()

    def usage(self) -> dict[int, int]:
        """Replicas in use per device index."""
        used = {d.index: 0 for d in self.devices}
        for indices in self._held.values():
            for i in indices:
                used[i] += 1
        return used

    def allocate(self, pod_uid: str, container: str, units: int) -> list[Device]:
        """Give ``units`` replicas to one container, each from the least-used GPU."""
        with self._lock:
            key = (pod_uid, container)
            if key in self._held:
                return [self.devices[i] for i in self._held[key]]
            used = self.usage()
            chosen: list[int] = []
            for _ in range(units):
                free = [d.index for d in self.devices if used[d.index] < self.replicas]
                if not free:
                    raise DeviceError(f"no free GPU replica left for {units} unit(s)")
                # Least used first; among equals prefer a device this container does not hold yet.
                best = min(free, key=lambda i: (used[i], i in chosen, i))
                used[best] += 1
                chosen.append(best)
            self._held[key] = chosen
            return [self.devices[i] for i in chosen]

    def release(self, pod_uid: str) -> None:
        """Free every replica held by the pod's containers."""
        with self._lock:
            for key in [k for k in self._held if k[0] == pod_uid]:
                del self._held[key]


def visible_devices_value(allocated: list[Device]) -> str:
    """The NVIDIA_VISIBLE_DEVICES value the device plugin hands out (UUIDs, no duplicates)."""
    seen: list[str] = []
    for device in allocated:
        if device.uuid not in seen:
            seen.append(device.uuid)
    return ",".join(seen)


def _select(tokens: list[str], candidates: list[Device], by_index: dict[str, Device]) -> list[Device]:
    chosen = []
    for token in tokens:
        device = by_index.get(token) or next((d for d in candidates if d.uuid == token), None)
        if device is None:
            raise DeviceError(f"unknown device {token!r}")
        if device not in chosen:
            chosen.append(device)
    return chosen


def host_cuda_visible_devices(nvidia_visible: str | None, pod_cuda_visible: str | None,
                              node_devices: list[Device]) -> str:
    """The host CUDA_VISIBLE_DEVICES that shows the process exactly the container's GPUs.

    ``nvidia_visible`` uses node indices or UUIDs, ``all``, or ``none``/``void``/empty/None (no
    GPU). The visible devices are renumbered from 0 in host (PCI bus) order; ``pod_cuda_visible``
    then picks among them by that new index or by UUID, stopping at the first invalid entry as
    CUDA does.
    """
    value = (nvidia_visible or "").strip()
    if value in ("", "none", "void"):
        visible: list[Device] = []
    elif value == "all":
        visible = list(node_devices)
    else:
        tokens = [t.strip() for t in value.split(",") if t.strip()]
        visible = _select(tokens, node_devices, {str(d.index): d for d in node_devices})
    visible.sort(key=lambda d: d.host_index)
    if pod_cuda_visible is not None:
        picked: list[Device] = []
        for token in (t.strip() for t in pod_cuda_visible.split(",")):
            if token.isdigit() and int(token) < len(visible):
                device: Device | None = visible[int(token)]
            else:
                device = next((d for d in visible if token and d.uuid.startswith(token)), None)
            if device is None:
                break
            if device not in picked:
                picked.append(device)
        visible = picked
    return ",".join(str(d.host_index) for d in visible)
