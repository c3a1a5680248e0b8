"""Fixtures for the chart's tests: a control plane of their own.

The chart installs the cluster-scoped ProcMesh CRD and an operator watching every namespace, so
it cannot share the session cluster with tests/integration/operator (whose operator subprocess
would reconcile the same meshes, and whose kubectl-applied CRD helm would refuse to adopt). This
package overrides ``cluster``, ``kube`` and ``namespace`` with a cluster that lives for the
package, on a node whose addresses (index 200: 127.0.1.201, pods in 127.210.0.0/16) cannot clash
with the session cluster's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import binaries, controlplane, pytest_plugin
from tests.cluster.process_node.config import NodeConfig
from tests.integration.helm import support


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Cluster]:
    node = NodeConfig("node-0")  # its slot is machine-wide: no clash with the session cluster
    with pytest_plugin.started_cluster(tmp_path_factory.mktemp("helm-cluster"), node, binaries.ALL) as instance:
        yield instance


@pytest.fixture(scope="package")
def kube(cluster: controlplane.Cluster) -> Iterator[Any]:
    with pytest_plugin.admin_client(cluster) as api_client:
        yield api_client


@pytest.fixture(scope="package")
def core(kube: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(kube)


@pytest.fixture(scope="package")
def custom(kube: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(kube)


@pytest.fixture(scope="package")
def namespaces(core: Any) -> list[str]:
    """The namespaces the values files name (they must exist before an install)."""
    from kubernetes import client

    names = [support.RELEASE_NAMESPACE, "team-a", "team-b"]
    for name in names:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return names
