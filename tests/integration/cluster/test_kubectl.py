"""kubectl works with the written kubeconfig: get nodes and get pods show what we expect."""

import os
import shutil
import subprocess

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")]


def _kubectl(cluster, *args):
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))
    return subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, check=True).stdout


def test_get_nodes_shows_the_ready_process_node(cluster):
    lines = _kubectl(cluster, "get", "nodes").splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["node-0"][1] == "Ready"
    # The node's heartbeat is a Lease it renews.
    lease = _kubectl(cluster, "get", "lease", "-n", "kube-node-lease", "node-0",
                     "-o", "jsonpath={.spec.holderIdentity}")
    assert lease == "node-0"


def test_get_pods_shows_a_running_pod_with_its_ip_and_node(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod(
        "web", "import time; time.sleep(3600)", restart_policy="Always"))
    pod = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("web", namespace)).status.phase == "Running" and p, "Running")

    lines = _kubectl(cluster, "get", "pods", "-n", namespace, "-o", "wide").splitlines()

    header, row = lines[0].split(), lines[1].split()
    assert header[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row[:4] == ["web", "1/1", "Running", "0"]
    assert pod.status.pod_ip in row and pod.spec.node_name in row


def test_logs_shows_what_the_container_printed(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod(
        "talker", "print('first'); print('second')"))
    testing.wait_for(lambda: core.read_namespaced_pod("talker", namespace).status.phase == "Succeeded", "done")

    assert _kubectl(cluster, "logs", "-n", namespace, "talker") == "first\nsecond\n"
    assert _kubectl(cluster, "logs", "-n", namespace, "talker", "--tail=1") == "second\n"
