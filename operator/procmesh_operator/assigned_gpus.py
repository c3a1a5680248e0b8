"""What a proc is given, as published in ``status.procs[]``: from the operator's own decisions
and the pod, never from the proc.

The operator never connects to a proc server and never reads a mesh token (DESIGN.md, STYLE.md
15): :func:`assigned_gpu` (pure, called by :mod:`.statuses`) reports the device the operator
pinned the pod to (its placement annotation), else the NVIDIA_VISIBLE_DEVICES value in the pod's
spec. In plugin mode the device plugin's choice is not in the pod object, so no GPU is reported;
a client that needs it asks its proc (the authenticated IDENTIFY request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract

#: The env var of the proc container that names its device (pinned mode, when no annotation).
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


def assigned_gpu(pod: Mapping[str, Any]) -> str | None:
    """The GPU the proc in ``pod`` was given, or None (no GPU, or chosen by a device plugin)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    device = annotations.get(contract.GPU_DEVICE_ANNOTATION)
    if device is not None:
        return str(device)
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != contract.CONTAINER_NAME:
            continue
        for env in container.get("env") or []:
            if env.get("name") == VISIBLE_DEVICES_ENV and env.get("value") not in (
                    None, "void", "none", "all", ""):
                return str(env["value"])
    return None
