"""End-to-end fixtures: a cluster whose node is real (tests/cluster/real_node), our images in its
containerd, and the chart installed from this checkout with those images.

``cluster`` (session) is a :class:`tests.cluster.real_node.cluster.RealNodeCluster` with one real
node, or, with ``PROCMESH_E2E_KUBECONFIG`` set, the cluster that kubeconfig names
(:class:`tests.e2e.support.ExternalCluster`: kind/run.sh runs the same checks on kind that way;
tests marked ``harness_node`` need the harness's own node and fail there, so deselect them with
``-m "e2e and not harness_node"``). The ``kube`` and ``namespace`` fixtures and the failure report
of :mod:`tests.cluster.pytest_plugin` work with either unchanged. ``release`` (session) is the chart
installed with ``image.pullPolicy=Never``. Everything needs root (namespaces, cgroups, mounts),
the binaries of ``bash tests/cluster/build.sh`` and the images of ``python -m tests.cluster
images``; without them the tests fail and say which command to run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import binaries
from tests.cluster.pytest_plugin import (  # noqa: F401 - fixtures and hooks are found by name
    kube,
    namespace,
    pytest_runtest_call,
    pytest_runtest_makereport,
)
from tests.cluster.real_node import cluster as real_cluster
from tests.cluster.real_node import images, node
from tests.e2e import support


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs a real node (kubelet, containerd) and our images; "
                            "select with -m e2e")
    config.addinivalue_line("markers", "harness_node: needs the harness's real node (its network "
                            "namespace, its containerd), not only a cluster")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A control plane and one real node in a network namespace of their own; all removed after.
    With ``PROCMESH_E2E_KUBECONFIG``, that cluster instead, used as it is and left running."""
    external = os.environ.get(support.EXTERNAL_KUBECONFIG)
    if external:
        if not Path(external).is_file():
            pytest.fail(f"{support.EXTERNAL_KUBECONFIG}={external} is not a file")
        yield support.ExternalCluster(Path(external), tmp_path_factory.mktemp("external-cluster"))
        return
    if os.geteuid() != 0:
        pytest.fail("the real node needs root (network namespace, cgroups, mounts)")
    absent = binaries.missing((*binaries.ALL, *binaries.NODE))
    if absent:
        pytest.fail(f"binaries missing ({', '.join(absent)}): run `bash tests/cluster/build.sh`")
    unbuilt = [n for n in node.IMPORTED if n not in images.built()]
    if unbuilt:
        pytest.fail(f"images not built for these sources ({', '.join(unbuilt)}): run "
                    "`python -m tests.cluster images`")
    instance = real_cluster.RealNodeCluster(tmp_path_factory.mktemp("real-cluster"))
    instance.up(real_nodes=(support.NODE,))
    try:
        yield instance
    finally:
        instance.down()


@pytest.fixture(autouse=True)
def _harness_node_only_on_the_harness(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("harness_node") and os.environ.get(support.EXTERNAL_KUBECONFIG):
        pytest.fail(f"{request.node.name} needs the harness's real node (its network namespace and "
                    "containerd); on another cluster deselect it: -m 'e2e and not harness_node'")


@pytest.fixture(scope="session")
def release(cluster: Any) -> Iterator[str]:
    """The chart installed with our images (never pulled) and the client role bound in
    :data:`support.CLIENT_NAMESPACE`; uninstalled at the end unless a test did it."""
    support.install(cluster)
    try:
        yield support.RELEASE
    finally:
        support.helm(cluster, "uninstall", support.RELEASE, "-n", support.RELEASE_NAMESPACE,
                     "--wait", check=False)
