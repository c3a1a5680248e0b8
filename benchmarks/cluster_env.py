"""For benchmarks: the local control plane of tests/cluster, the CRD, and the operator running as
a subprocess (``python -m procmesh_operator``), started together and torn down together."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    """Yield (kubeconfig, operator metrics port). Starts a cluster unless ``kubeconfig`` is given
    (that cluster must have the CRD applied)."""
    cluster = None
    if kubeconfig is None:
        sys.path.insert(0, str(ROOT))
        from tests.cluster import controlplane
        from tests.cluster.process_node.config import NodeConfig

        cluster = controlplane.Cluster(pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-")))
        cluster.up([NodeConfig("node-0", pods=pods_per_node)])
        kubeconfig = str(cluster.kubeconfig)
        for args in (["apply", "-f", str(ROOT / "crds" / "procmesh.yaml")],
                     ["wait", "--for=condition=Established", "crd/procmeshes.procmesh.io"]):
            subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], check=True, capture_output=True)
    metrics_port, liveness_port = free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")]))
    log = open(tempfile.mktemp(prefix="pm-bench-operator-", suffix=".log"), "wb")
    op = subprocess.Popen(
        [sys.executable, "-m", "procmesh_operator", "-A", "--standalone", "--kubeconfig", kubeconfig,
         "--metrics-port", str(metrics_port), "--liveness", f"http://127.0.0.1:{liveness_port}/healthz"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                operator_requests(metrics_port)
                break
            except OSError:
                if time.monotonic() > deadline or op.poll() is not None:
                    raise RuntimeError(f"the operator did not start; see {log.name}") from None
                time.sleep(0.2)
        yield kubeconfig, metrics_port
    finally:
        op.send_signal(signal.SIGTERM)
        try:
            op.wait(timeout=30)
        except subprocess.TimeoutExpired:
            op.kill()
        if cluster is not None:
            cluster.down()
