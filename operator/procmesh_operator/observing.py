"""What a proc actually sees, as published in ``status.procs[]``.

:func:`observed_gpu` is the one place where the proc server's authenticated ``describe`` call
will plug in (it reports the UUID of the GPU the process sees). Until that call exists, the GPU
is what the pod was given: the NVIDIA_VISIBLE_DEVICES value rendered for it (pinned mode), or,
when a node agent or device plugin exposes it, the allocated device in the pod's env.
Called by :mod:`.statuses`; pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procmesh_operator import names


def observed_gpu(pod: Mapping[str, Any]) -> str | None:
    """The GPU the proc in ``pod`` sees: a UUID from the proc server once it can describe
    itself; today the device the pod was given, or None (no GPU, or not known yet)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    device = annotations.get(names.GPU_DEVICE_ANNOTATION)
    if device is not None:
        return str(device)
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != names.CONTAINER_NAME:
            continue
        for env in container.get("env") or []:
            if env.get("name") == "NVIDIA_VISIBLE_DEVICES" and env.get("value") not in (
                    None, "void", "none", "all", ""):
                return str(env["value"])
    return None
