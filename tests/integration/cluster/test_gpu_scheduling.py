"""GPU pods land only where GPUs are free; the emulated device plugin and runtime set the env.

Each test adds its own nodes with a taint only its pods tolerate, and its pods may go only to those
nodes or the default node, so nodes of other tests (tainted or not) never compete; the default
node (no GPUs) is always a candidate and must never be picked.
"""

import json
import uuid

import pytest
from kubernetes import client

from tests.cluster import testing
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import DEFAULT_NODE

pytestmark = pytest.mark.cluster

DUMP = ("import json, os, time; print(json.dumps({k: os.environ.get(k) for k in "
        "('NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES')}), flush=True); time.sleep(3600)")


def _tainted_nodes(cluster, *configs):
    """Add nodes only this test's pods tolerate; the pod spec fields that place a pod on them
    (or on the default node)."""
    key = f"procmesh.io/test-{uuid.uuid4().hex[:6]}"
    taint = {"key": key, "value": "yes", "effect": "NoSchedule"}
    for config in configs:
        cluster.add_node(NodeConfig(**config, taints=(taint,)))
    candidates = [c["name"] for c in configs] + [DEFAULT_NODE]
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": candidates}]}
    return {"tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]}}}}


def _gpu_pod(name, placement, resource="nvidia.com/gpu", units=1, env=()):
    return testing.python_pod(name, DUMP, restart_policy="Always", **placement, container={
        "resources": {"limits": {resource: str(units)}} if units else {},
        "env": list(env),
    })


def _env(cluster, namespace, name):
    return json.loads(testing.wait_for(lambda: testing.pod_output(cluster, namespace, name), f"{name} output"))


def test_gpu_pod_lands_only_on_a_node_with_free_gpus(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    gpu_node = f"gpu-{namespace}"
    placement = _tainted_nodes(cluster, {"name": gpu_node, "gpus": 1})

    core.create_namespaced_pod(namespace, _gpu_pod("first", placement))
    first = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("first", namespace)).status.phase == "Running" and p, "Running")
    assert first.spec.node_name == gpu_node

    # The only GPU is taken: a second GPU pod is not placed on the GPU-less default node.
    core.create_namespaced_pod(namespace, _gpu_pod("second", placement))
    unschedulable = testing.wait_for(
        lambda: next((c for c in core.read_namespaced_pod("second", namespace).status.conditions or []
                      if c.type == "PodScheduled" and c.status == "False"), None), "FailedScheduling")
    assert unschedulable.reason == "Unschedulable"
    assert "nvidia.com/gpu" in unschedulable.message
    assert core.read_namespaced_pod("second", namespace).spec.node_name is None

    env = _env(cluster, namespace, "first")
    assert env["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-")
    assert env["CUDA_VISIBLE_DEVICES"] == "0"

    # Freeing the GPU lets the second pod in.
    core.delete_namespaced_pod("first", namespace)
    second = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("second", namespace)).status.phase == "Running" and p, "Running")
    assert second.spec.node_name == gpu_node


def test_time_sliced_gpus_go_to_the_least_used_device(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    node = f"shared-{namespace}"
    placement = _tainted_nodes(cluster, {"name": node, "gpus": 2, "gpu_replicas": 2,
                                           "gpu_resource": "nvidia.com/gpu.shared"})
    labels = core.read_node(node).metadata.labels
    assert labels["nvidia.com/gpu.count"] == "2" and labels["nvidia.com/gpu.replicas"] == "2"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert core.read_node(node).status.allocatable["nvidia.com/gpu.shared"] == "4"

    devices = []
    for i in range(4):
        core.create_namespaced_pod(namespace, _gpu_pod(f"p{i}", placement, "nvidia.com/gpu.shared"))
        testing.wait_for(lambda i=i: core.read_namespaced_pod(f"p{i}", namespace).status.phase == "Running", "Running")
        devices.append(_env(cluster, namespace, f"p{i}")["CUDA_VISIBLE_DEVICES"])
    # Least used first: the replicas alternate between the two physical GPUs.
    assert devices == ["0", "1", "0", "1"]


def test_pinned_pod_sees_exactly_its_device(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    node = f"pinned-{namespace}"
    placement = _tainted_nodes(cluster, {"name": node, "gpus": 2})
    # Pinned mode: no resource request; NVIDIA_VISIBLE_DEVICES names the physical device and the
    # process addresses it as device 0.
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "1"}, {"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    pod = _gpu_pod("pinned", placement, units=0, env=env)
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    core.create_namespaced_pod(namespace, pod)

    seen = _env(cluster, namespace, "pinned")
    assert seen == {"NVIDIA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}
