"""A cluster older or plainer than our features need: no resource.k8s.io/v1 (as before
Kubernetes 1.34) and no Kueue.

This module starts a control plane of its own whose components emulate Kubernetes 1.33
(``--emulated-version``), where resource.k8s.io/v1 does not exist: the API is really absent,
not faked. Aspects: discovery confirms it;
a dra mesh is refused with DRANotServed in Ready and GPUBudgetSatisfied, with the fix in the
message, and gets no pods; the client's spawn_procs fails at once with that reason, not at its
timeout; a mesh labelled for a Kueue queue says Kueue is missing and gets no pods; a CPU mesh
on the same cluster still becomes Ready (nothing else depends on DRA or Kueue).
"""

import pytest

from mesh_client._src import contract
from mesh_client.kubernetes import KubernetesHostMesh, MeshNotReady
from tests.cluster import binaries, components
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import admin_client, started_cluster
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

DRA = {"mode": "dra", "deviceClassName": "gpu.nvidia.com"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Overrides the session cluster for this module: one without resource.k8s.io/v1."""
    with started_cluster(tmp_path_factory.mktemp("no-dra"), NodeConfig("node-0"),
                         binaries.CONTROL_PLANE, gang=False,
                         emulate=components.EMULATE_BEFORE_DRA) as instance:
        yield instance


@pytest.fixture(scope="module")
def kube(cluster):
    with admin_client(cluster) as api_client:
        yield api_client


@pytest.fixture(scope="module")
def operator(cluster, tmp_path_factory):
    with support.operator_with_crd(cluster.kubeconfig, tmp_path_factory.mktemp("op")) as op:
        yield op


def test_the_cluster_does_not_serve_resource_v1(kube, operator):
    from kubernetes import client

    groups = client.ApisApi(kube).get_api_versions().groups
    versions = {v.group_version for g in groups for v in g.versions}
    assert "scheduling.k8s.io/v1" in versions
    assert contract.RESOURCE_API_VERSION not in versions


def test_a_dra_mesh_is_refused_with_the_fix(operator, custom, core, namespace):
    support.create_mesh(custom, namespace, "old", perHost=[{"name": "gpus", "size": 1}], gpus=DRA)
    mesh = support.wait_condition(custom, namespace, "old", contract.READY, "False",
                                  contract.DRA_NOT_SERVED)
    for type_ in (contract.READY, contract.GPU_BUDGET):
        c = support.condition(mesh, type_)
        assert (c["status"], c["reason"]) == ("False", contract.DRA_NOT_SERVED)
        assert contract.RESOURCE_API_VERSION in c["message"]
        assert "use gpus.mode pinned or plugin" in c["message"]
    assert support.mesh_pods(core, namespace, "old") == []


def test_spawn_procs_fails_at_once_with_the_reason(operator, kube, namespace):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=300)
    with pytest.raises(MeshNotReady) as info:
        hosts.spawn_procs(per_host={"gpus": 1}, gpus="dra", name="client-dra")
    assert info.value.reason == contract.DRA_NOT_SERVED
    text = str(info.value)
    assert "cannot become Ready" in text and contract.RESOURCE_API_VERSION in text
    assert "was not Ready after" not in text  # refused at once, not at the timeout


def test_a_queued_mesh_without_kueue_says_so(operator, custom, core, namespace):
    manifest = support.mesh_manifest("queued", perHost=[{"name": "gpus", "size": 1}])
    manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    custom.create_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                           manifest)
    mesh = support.wait_condition(custom, namespace, "queued", contract.DEGRADED, "True")
    message = support.condition(mesh, contract.DEGRADED)["message"]
    assert "kueue.x-k8s.io/queue-name=team" in message and "install Kueue" in message
    assert support.mesh_pods(core, namespace, "queued") == []


def test_a_cpu_mesh_still_becomes_ready(operator, custom, core, namespace):
    support.create_mesh(custom, namespace, "cpu", perHost=[{"name": "gpus", "size": 2}])
    mesh = support.wait_ready(custom, namespace, "cpu")
    assert [p["rank"] for p in mesh["status"]["procs"]] == [0, 1]
    assert len(support.mesh_pods(core, namespace, "cpu")) == 2
