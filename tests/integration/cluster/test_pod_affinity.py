"""Required pod affinity puts a pod on the node of the pod it names."""

import uuid

import pytest
from kubernetes import client

from tests.cluster import testing
from tests.cluster.process_node.config import NodeConfig

pytestmark = pytest.mark.cluster

SLEEP = "import time; time.sleep(3600)"


def test_required_pod_affinity_colocates(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    key = f"procmesh.io/test-{uuid.uuid4().hex[:6]}"
    for suffix in ("a", "b"):
        cluster.add_node(NodeConfig(f"aff-{suffix}-{namespace}",
                                    taints=({"key": key, "value": "yes", "effect": "NoSchedule"},)))
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]
    target = f"aff-b-{namespace}"

    anchor = testing.python_pod("anchor", SLEEP, restart_policy="Always", tolerations=tolerations,
                                nodeSelector={"kubernetes.io/hostname": target})
    anchor["metadata"]["labels"] = {"role": "anchor"}
    core.create_namespaced_pod(namespace, anchor)
    testing.wait_for(lambda: core.read_namespaced_pod("anchor", namespace).status.phase == "Running", "anchor Running")

    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"role": "anchor"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(3):
        core.create_namespaced_pod(namespace, testing.python_pod(
            f"follower-{i}", SLEEP, restart_policy="Always", tolerations=tolerations, affinity=affinity))

    for i in range(3):
        pod = testing.wait_for(
            lambda i=i: (p := core.read_namespaced_pod(f"follower-{i}", namespace)).status.phase == "Running" and p,
            f"follower-{i} Running")
        assert pod.spec.node_name == target
