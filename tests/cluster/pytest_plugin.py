"""Pytest fixtures for the local cluster, imported by ``tests/integration/conftest.py``.

``cluster`` (session) starts the control plane and one process node (``node-0``, no GPUs) in a
temporary folder and stops everything at the end; it yields the
:class:`tests.cluster.controlplane.Cluster` (``.kubeconfig``, ``.add_node(NodeConfig(...))``).
``kube`` (session) is a ``kubernetes.client.ApiClient`` for the admin kubeconfig. ``kueue``
(session) runs Kueue's controller manager against ``cluster`` (tests/cluster/kueue), built on
first use. ``namespace``
(function) is a fresh namespace with its ``default`` service account ready, deleted afterwards.
When a test fails, the output of the containers it ran is added to its report.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import binaries, controlplane, testing
from tests.cluster.process_node.config import NodeConfig

DEFAULT_NODE = "node-0"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Cluster]:
    """A running control plane with one process node; torn down, leaving no process.

    With ``PROCMESH_CLUSTER_REUSE=1``, a cluster already started by ``python -m tests.cluster up``
    (in ``$PROCMESH_CLUSTER_DIR``) is used as it is and left running: quicker local iterations,
    and the way to run tests against a real node (``up --real-node``, then pytest inside the
    cluster's network namespace: tests/cluster/README.md, "Tests on a real node").
    """
    if os.environ.get("PROCMESH_CLUSTER_REUSE") == "1":
        from tests.cluster.real_node import cluster as real_cluster

        root = controlplane.default_dir()
        running = real_cluster.RealNodeCluster(root) if real_cluster.is_real(root) else controlplane.Cluster(root)
        if running.running():
            yield running
            return
    with started_cluster(tmp_path_factory.mktemp("cluster"), NodeConfig(DEFAULT_NODE), binaries.CONTROL_PLANE) as instance:
        yield instance


@contextlib.contextmanager
def started_cluster(folder: Path, node: NodeConfig, needs: Sequence[str], *,
                    gang: bool = True, emulate: str | None = None
                    ) -> Iterator[controlplane.Cluster]:
    """A control plane with ``node`` in ``folder``, stopped on exit; skipped (failed under CI)
    when a binary in ``needs`` is missing. ``gang=False``: without the PodGroup API;
    ``emulate``: an older Kubernetes (see :class:`controlplane.Cluster`)."""
    absent = binaries.missing(needs)
    if absent:
        message = f"cluster binaries missing ({', '.join(absent)}): run `bash tests/cluster/build.sh`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    instance = controlplane.Cluster(folder, gang=gang, emulate=emulate)
    instance.up([node])
    try:
        yield instance
    finally:
        instance.down()


@contextlib.contextmanager
def admin_client(cluster: controlplane.Cluster) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` for the cluster's admin kubeconfig, closed on exit."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(cluster.kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()
        client.Configuration.set_default(None)


@pytest.fixture(scope="session")
def kube(cluster: controlplane.Cluster) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` authenticated as cluster admin."""
    with admin_client(cluster) as api_client:
        yield api_client


@pytest.fixture(scope="session")
def kueue(cluster: controlplane.Cluster) -> Iterator[Any]:
    """Kueue's real controller manager (:mod:`tests.cluster.kueue.manager`) against the session
    cluster, its CRDs installed; stopped at the end. The first use builds it (minutes: see
    tests/cluster/README.md, "Kueue"); skipped (failed under CI) where it can be neither found
    nor built."""
    import shutil

    from tests.cluster.kueue import builds, manager

    if not builds.ready(builds.cache_dir()) and shutil.which("go") is None:
        message = "Kueue is not built and there is no Go to build it: run `python -m tests.cluster.kueue.builds`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    instance = manager.start(cluster)
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture
def namespace(kube: Any) -> Iterator[str]:
    """A fresh namespace whose ``default`` service account and root CA exist already."""
    from kubernetes import client

    core = client.CoreV1Api(kube)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    testing.wait_for(lambda: core.read_namespaced_service_account("default", name), "default service account")
    testing.wait_for(lambda: core.read_namespaced_config_map("kube-root-ca.crt", name), "kube-root-ca.crt")
    yield name
    core.delete_namespace(name)


_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    item.stash[_STARTED] = time.time()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    funcargs = getattr(item, "funcargs", {})
    instance = funcargs.get("cluster")
    if not report.failed or call.when != "call" or instance is None:
        return report
    namespace = funcargs.get("namespace")
    output = testing.all_output(instance, namespace, since=item.stash.get(_STARTED, 0.0))
    report.sections.append(("container output", output or "(no container output)"))
    agents = []
    for log in sorted(instance.root.glob("nodes/*/agent.log")):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        agents.append(f"--- {log.parent.name} ---\n{tail}")
    report.sections.append(("process node logs", "\n".join(agents)))
    # The operator's own log (tests/integration/operator's fixture), when the test used one.
    log = getattr(funcargs.get("operator"), "log", None)
    if isinstance(log, Path) and log.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        report.sections.append(("operator log", tail))
    return report


__all__ = ["DEFAULT_NODE", "NodeConfig", "cluster", "kube", "kueue", "namespace",
           "pytest_runtest_call", "pytest_runtest_makereport"]
