"""Helpers of the end-to-end tests: the chart installed with our images, Jobs, the node's namespace.

helm and kubectl come from the chart's and the operator's integration helpers (one way to run
each). The tests run on the harness's real node, or on any cluster given by a kubeconfig
(:class:`ExternalCluster`, how ``tests/e2e/kind/run.sh`` runs the same checks on kind) into
which our images were loaded. What only the harness's node offers is here too, for the tests
marked ``harness_node``: commands inside its network namespace (pod IPs route there) and host pids
of containers (from its containerd). Image records come from :mod:`tests.cluster.real_node.images`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cluster import binaries, testing
from tests.cluster.real_node import cluster as real_cluster
from tests.cluster.real_node import images, netns
from tests.integration.helm.support import CHART, FULLNAME, RELEASE, RELEASE_NAMESPACE, helm
from tests.integration.operator.support import ROOT, kubectl

__all__ = ["CHART", "FULLNAME", "RELEASE", "RELEASE_NAMESPACE", "helm", "kubectl"]

#: The harness's real node (an external cluster's node is found by :func:`node_name`).
NODE = "node-0"
#: Set to a kubeconfig, the e2e tests run on that cluster instead of starting the harness's.
EXTERNAL_KUBECONFIG = "PROCMESH_E2E_KUBECONFIG"
#: Where controller Jobs run, with the chart's client role bound to CLIENT_ACCOUNT.
CLIENT_NAMESPACE = "e2e-client"
CLIENT_ACCOUNT = "controller"
#: How long a Job (a whole example run) may take.
JOB_SECONDS = 600


@dataclasses.dataclass(frozen=True)
class ExternalCluster:
    """A cluster the tests did not start (kind, a real one): its admin kubeconfig and a scratch
    folder for helm's state. Our images must already be in its nodes (see kind/run.sh)."""

    kubeconfig: Path
    root: Path


def node_name(cluster: Any) -> str:
    """The node the e2e meshes run on: the harness's real node, or an external cluster's first
    node that takes pods (kind's single node is its control plane, untainted)."""
    if not isinstance(cluster, ExternalCluster):
        return NODE
    nodes = json.loads(kubectl(cluster, "get", "nodes", "-o", "json").stdout)["items"]
    for item in nodes:
        taints = item["spec"].get("taints") or []
        if not any(t.get("effect") == "NoSchedule" for t in taints):
            return str(item["metadata"]["name"])
    raise AssertionError("no node of the cluster takes pods (every node has a NoSchedule taint)")


def image(name: str) -> dict[str, str]:
    """The build record of one of our images (reference, image ID)."""
    return images.built()[name]


def install(cluster: real_cluster.RealNodeCluster | ExternalCluster) -> None:
    """helm install of the chart: our images, never pulled; the client role for Jobs."""
    kubectl(cluster, "create", "namespace", CLIENT_NAMESPACE)
    kubectl(cluster, "-n", CLIENT_NAMESPACE, "create", "serviceaccount", CLIENT_ACCOUNT)
    bindings = json.dumps([{"namespace": CLIENT_NAMESPACE, "serviceAccount": CLIENT_ACCOUNT}])
    helm(cluster, "install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace",
         "--set", "image.pullPolicy=Never", "--set", "rbac.clientRole.create=true",
         "--set", "rbac.clientRole.createMeshes=true",
         "--set-json", f"rbac.clientRole.bindings={bindings}", "--wait", "--timeout", "300s")


def in_netns_process(cluster: real_cluster.RealNodeCluster, args: list[str]) -> subprocess.Popen[str]:
    """Start ``python ARGS`` inside the cluster's network namespace (reads pod IPs), with the
    admin kubeconfig and this checkout on the path; stdout is a pipe."""
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "operator")]))
    return subprocess.Popen([*netns.enter(cluster.netns), sys.executable, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)


def container_pid(cluster: real_cluster.RealNodeCluster, container_id: str) -> int:
    """The host pid of a container's first process, from the node's containerd."""
    spec = cluster.real_nodes()[0].spec
    out = subprocess.run([str(binaries.path("ctr")), "--address", str(spec.containerd_socket),
                          "-n", "k8s.io", "tasks", "ls"], capture_output=True, text=True, check=True).stdout
    bare = container_id.removeprefix("containerd://")
    for line in out.splitlines()[1:]:
        task, pid, _status = line.split()
        if task == bare:
            return int(pid)
    raise AssertionError(f"containerd runs no task {bare}:\n{out}")


def run_job(cluster: real_cluster.RealNodeCluster | ExternalCluster, namespace: str, name: str, image_ref: str,
            command: list[str], service_account: str = CLIENT_ACCOUNT) -> str:
    """Run a one-pod Job to its end; return its log, or fail with it."""
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "serviceAccountName": service_account,
            "containers": [{"name": "main", "image": image_ref, "imagePullPolicy": "Never",
                            "command": command}]}}},
    }
    kubectl(cluster, "-n", namespace, "apply", "-f", "-", input=json.dumps(job))

    def finished() -> dict[str, Any] | None:
        body = json.loads(kubectl(cluster, "-n", namespace, "get", "job", name, "-o", "json").stdout)
        done = [c for c in body.get("status", {}).get("conditions", [])
                if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
        return done[0] if done else None

    outcome = testing.wait_for(finished, f"job {name} finished", timeout=JOB_SECONDS)
    log = kubectl(cluster, "-n", namespace, "logs", f"job/{name}", check=False).stdout
    assert outcome["type"] == "Complete", f"job {name} failed ({outcome.get('message')}):\n{log}"
    return log
