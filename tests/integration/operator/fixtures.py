"""Fixtures shared by the integration tests of the operator, the Kubernetes backend and the chart:
subprocess (``python -m procmesh_operator``) against the local control plane of tests/cluster,
and a GPU process node. No mocks; waits are level-based and nothing asserts on durations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import controlplane, testing
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator.support import (
    DRA_NODE,
    GPU_NODE,
    OperatorProcess,
    install_crd,
    operator_with_crd,
)


@pytest.fixture(scope="session")
def crd(cluster: controlplane.Cluster) -> None:
    install_crd(cluster.kubeconfig)


@pytest.fixture(scope="session")
def gpu_node(cluster: controlplane.Cluster) -> str:
    """A second process node with two emulated GPUs (GFD labels, nvidia.com/gpu: 2)."""
    cluster.add_node(NodeConfig(GPU_NODE, gpus=2))
    return GPU_NODE


@pytest.fixture(scope="session")
def dra_node(cluster: controlplane.Cluster) -> str:
    """A process node with two emulated GPUs published as a ResourceSlice of the NVIDIA DRA
    driver (gpu.nvidia.com), and no device plugin resource."""
    cluster.add_node(NodeConfig(DRA_NODE, gpus=2, dra=True))
    return DRA_NODE


@pytest.fixture(scope="session")
def operator(cluster: controlplane.Cluster, crd: None, gpu_node: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with operator_with_crd(cluster.kubeconfig, tmp_path_factory.mktemp("operator")) as op:
        yield op


@pytest.fixture
def custom(kube: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(kube)


@pytest.fixture
def core(kube: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(kube)




@pytest.fixture
def devices_free(core: Any) -> None:
    """Budgets are cluster-wide: wait until earlier tests' pinned procs (and dra claims) are
    gone."""

    def free() -> bool:
        pods = core.list_pod_for_all_namespaces(label_selector="procmesh.io/mesh").items
        if [p for p in pods if "procmesh.io/gpu-device" in (p.metadata.annotations or {})]:
            return False
        # dra mode: a device stays allocated while a claim of an earlier test holds it.
        from kubernetes import client

        claims = client.CustomObjectsApi(core.api_client).list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceclaims", label_selector="procmesh.io/mesh")
        return not claims.get("items")

    testing.wait_for(free, "no pinned proc left from earlier tests")
