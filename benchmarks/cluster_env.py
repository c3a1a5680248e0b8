"""For benchmarks: the local control plane of tests/cluster, the CRD, and the operator running as
a subprocess (``python -m procmesh_operator``), started together and torn down together. The CRD
and the operator come from the tests' one helper (tests/integration/operator/support.py)."""

from __future__ import annotations

import contextlib
import pathlib
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]


def mesh_ready(obj: dict[str, Any]) -> bool:
    """Ready=True for the mesh's current generation."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return bool(c["status"] == "True"
                        and c.get("observedGeneration") == obj["metadata"]["generation"])
    return False


def time_until_ready(custom: Any, namespace: str, spec: dict[str, Any], metrics_port: int,
                     name: str = "bench") -> dict[str, Any]:
    """Create a ProcMesh of ``spec`` and watch it to Ready: the seconds taken, and the API
    requests the operator made meanwhile (from its metrics)."""
    from kubernetes import watch

    from mesh_client._src import contract

    before = operator_requests(metrics_port)
    body = {"apiVersion": contract.API_VERSION, "kind": contract.KIND, "metadata": {"name": name},
            "spec": spec}
    started = time.monotonic()
    created = custom.create_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                                     contract.PLURAL, body)
    w = watch.Watch()
    for event in w.stream(custom.list_namespaced_custom_object, contract.GROUP, contract.VERSION,
                          namespace, contract.PLURAL,
                          resource_version=created["metadata"]["resourceVersion"],
                          timeout_seconds=600):
        if event["object"]["metadata"]["name"] == name and mesh_ready(event["object"]):
            w.stop()
    elapsed = time.monotonic() - started
    time.sleep(1.0)  # let the last status write and events settle before counting requests
    return {"seconds": elapsed, "requests": operator_requests(metrics_port) - before}


def operator_requests(metrics_port: int) -> int:
    """The operator's API request count so far (its procmesh_api_requests_total)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("procmesh_api_requests_total"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


@contextlib.contextmanager
def cluster_with_operator(kubeconfig: str | None = None, pods_per_node: int = 110) -> Iterator[tuple[str, int]]:
    """Yield (kubeconfig, operator metrics port). Starts a cluster unless ``kubeconfig`` is given;
    either way the CRD is installed (or updated) and the operator started."""
    sys.path[:0] = [str(ROOT), str(ROOT / "operator")]
    from tests.cluster import controlplane
    from tests.cluster.process_node.config import NodeConfig
    from tests.integration.operator import support

    cluster = None
    if kubeconfig is None:
        cluster = controlplane.Cluster(pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-")))
        cluster.up([NodeConfig("node-0", pods=pods_per_node)])
        kubeconfig = str(cluster.kubeconfig)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-operator-"))
    try:
        with support.operator_with_crd(pathlib.Path(kubeconfig), folder) as operator:
            yield kubeconfig, operator.metrics_port
    finally:
        if cluster is not None:
            cluster.down()
