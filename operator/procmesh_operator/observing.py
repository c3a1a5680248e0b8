"""What a proc actually sees, as published in ``status.procs[]``.

:func:`describe_gpu` is the one place where the proc server's authenticated ``describe`` call
plugs in: :mod:`.reconciling` calls it (in a thread) once per ready pod of a GPU mesh, with the
mesh token, and it returns the GPU the process reports (its UUID once torch has initialised
CUDA). :func:`observed_gpu` (pure, called by :mod:`.statuses`) prefers that answer and falls
back to what the pod was given: the device rendered for it in pinned mode, or the
NVIDIA_VISIBLE_DEVICES value in its spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procmesh_operator import names


def describe_gpu(address: str, token: bytes, timeout: float = 3.0) -> str | None:
    """Ask the proc server at ``address`` ("ip:port") which GPU it sees (blocking).

    Uses the client's describe call, which authenticates with the mesh token before anything
    else and unpickles nothing; the operator never imports the proc server itself."""
    from mesh_client._src.runtime import describe  # the client side of the wire

    host, _, port = address.rpartition(":")
    gpu = describe.describe_proc((host, int(port)), token, timeout=timeout).get("gpu")
    return None if gpu in (None, "") else str(gpu)


def observed_gpu(pod: Mapping[str, Any], described: str | None = None) -> str | None:
    """The GPU the proc in ``pod`` sees: what the proc server described, else the device the
    pod was given, else None (no GPU, or not known yet)."""
    if described is not None:
        return described
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
