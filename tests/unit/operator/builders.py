"""Builders of ProcMesh, Pod and Node dicts for the operator's unit tests (no API involved)."""

from __future__ import annotations

from typing import Any

from mesh_client._src import contract
from procmesh_operator import placing, rendering, settings, specs

SETTINGS = settings.Settings()


def mesh_body(name: str = "m", *, hosts: int = 1, per_host: Any = (("gpus", 2),),
              generation: int = 1, status: dict[str, Any] | None = None,
              **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": contract.API_VERSION, "kind": contract.KIND,
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "generation": generation, "resourceVersion": "1"},
        "spec": {"hosts": hosts, "perHost": [{"name": n, "size": s} for n, s in per_host],
                 **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def mesh(name: str = "m", **kw: Any) -> specs.MeshSpec:
    return specs.parse(mesh_body(name, **kw))


def pod(m: specs.MeshSpec, rank: int, *, phase: str = "Running", ready: bool = True,
        node: str | None = "n1", ip: str | None = "127.0.1.1", uid: str | None = None,
        terminating: bool = False, rv: int = 10,
        placement: rendering.ProcPlacement | None = None) -> dict[str, Any]:
    """A pod as the API would return it after the operator created it and a node ran it."""
    body = rendering.render_pod(m, rank, placement or rendering.ProcPlacement(), SETTINGS)
    body["metadata"]["uid"] = uid or f"pod-uid-{m.name}-{rank}"
    body["metadata"]["resourceVersion"] = str(rv)
    if terminating:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if node:
        body["spec"]["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if ip:
        status["podIP"] = ip
    status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    body["status"] = status
    return body


def node(name: str, *, gpus: int = 2, memory_mib: int | None = 81920, ready: bool = True,
         cordoned: bool = False, labels: dict[str, str] | None = None,
         taints: tuple[dict[str, str], ...] = ()) -> placing.NodeInfo:
    return placing.NodeInfo(name=name, labels=labels or {}, gpu_count=gpus,
                            gpu_memory_mib=memory_mib, ready=ready, unschedulable=cordoned,
                            taints=taints)
