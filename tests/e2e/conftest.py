"""End-to-end fixtures: a cluster whose node is real (tests/cluster/real_node), our images in its
containerd, and the chart installed from this checkout with those images.

``cluster`` (session) is a :class:`tests.cluster.real_node.cluster.RealNodeCluster` with one real
node; the ``kube`` and ``namespace`` fixtures and the failure report of
:mod:`tests.cluster.pytest_plugin` work with it unchanged. ``release`` (session) is the chart
installed with ``image.pullPolicy=Never``. Everything needs root (namespaces, cgroups, mounts),
the binaries of ``bash tests/cluster/build.sh`` and the images of ``python -m tests.cluster
images``; without them the tests fail and say which command to run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

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


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[real_cluster.RealNodeCluster]:
    """A control plane and one real node in a network namespace of their own; all removed after."""
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


@pytest.fixture(scope="session")
def release(cluster: real_cluster.RealNodeCluster) -> Iterator[str]:
    """The chart installed with our images (never pulled) and the client role bound in
    :data:`support.CLIENT_NAMESPACE`; uninstalled at the end unless a test did it."""
    support.install(cluster)
    try:
        yield support.RELEASE
    finally:
        support.helm(cluster, "uninstall", support.RELEASE, "-n", support.RELEASE_NAMESPACE,
                     "--wait", check=False)
