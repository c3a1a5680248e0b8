"""Kueue's Workload CRD installed and deleted under a running operator (Kueue installed and
uninstalled, or its CRDs replaced by an upgrade): the operator keeps running and reconciling.

Under kopf's watch of Workloads, a list or watch answered 404 once the CRD was gone ended the
whole operator process (within ten rounds in each of four runs here). The race cannot be
forced from outside, so the test makes several rounds. A cluster of its own (it has no Kueue):
the session's may run Kueue, whose CRDs this must not touch. The Workload CRD here is a
stand-in of Kueue's name and version only: what counts is that it is served and then not.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.cluster import binaries, testing
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import admin_client, started_cluster
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

ROUNDS = 10
WORKLOADS = "workloads.kueue.x-k8s.io"
WORKLOAD_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": WORKLOADS},
    "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "workloads", "singular": "workload", "kind": "Workload",
                       "listKind": "WorkloadList"},
             "versions": [{"name": "v1beta2", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                               # Kueue's is large: its storage takes a while to start (429
                               # "storage is (re)initializing" meanwhile), the window in which
                               # kopf's list was retried, then answered 404.
                               "properties": {"spec": {"type": "object", "properties": {
                                   f"field{i}": {"type": "object", "properties": {
                                       f"sub{j}": {"type": "string"} for j in range(20)}}
                                   for i in range(200)}}}}}}]},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Overrides the session cluster for this module: one without Kueue."""
    with started_cluster(tmp_path_factory.mktemp("no-kueue"), NodeConfig("node-0"),
                         binaries.CONTROL_PLANE) as instance:
        yield instance


@pytest.fixture(scope="module")
def kube(cluster):
    with admin_client(cluster) as api_client:
        yield api_client


@pytest.fixture(scope="module")
def operator(cluster, tmp_path_factory):
    with support.operator_with_crd(cluster.kubeconfig, tmp_path_factory.mktemp("op")) as op:
        yield op


def _served(ext) -> bool:
    crd = ext.read_custom_resource_definition(WORKLOADS)
    return any(c.type == "Established" and c.status == "True"
               for c in crd.status.conditions or [])


def test_the_operator_outlives_kueues_crds(operator, namespace, custom, kube):
    ext = client.ApiextensionsV1Api(kube)
    for _ in range(ROUNDS):
        ext.create_custom_resource_definition(WORKLOAD_CRD)
        testing.wait_for(lambda: _served(ext), "the Workload CRD Established")
        ext.delete_custom_resource_definition(WORKLOADS)  # while a watcher may start on it
        testing.wait_for(lambda: WORKLOADS not in {c.metadata.name for c in
                                                   ext.list_custom_resource_definition().items},
                         "the Workload CRD gone")
        assert operator.proc.poll() is None, operator.log.read_text()[-3000:]
    support.create_mesh(custom, namespace, "after", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "after")
    assert operator.proc.poll() is None
