"""A mesh is one gang on a cluster without the PodGroup API: the operator's scheduling gate.

This module starts a control plane of its own with the GenericWorkload gate off (so
``scheduling.k8s.io/v1alpha2`` is not served, as on clusters before 1.36), a process node of 6
time-sliced GPU units (2 GPUs x 3 replicas) and an operator with ``--gang auto``, which then
picks the gate. The checks are issue 16's, shared with test_gangs.py (gang_checks.py).

Aspects: pods wait at the gate procmesh.io/gang, and a 12-proc mesh keeps all 12 there while a
6-proc mesh is released and runs; 4 + 4 + 6 procs take turns with no deadlock; the API is really
not served; template.priorityClassName reaches the pods; a released mesh that the scheduler
places only in part (here: a pod anti-affinity over ``kubernetes.io/os``, a topology key the
operator's fit check does not simulate) is recreated behind the gate after the bounded wait, and
holds nothing during the back-off; a 2-host mesh on the one GPU node is never released, since
the check knows hosts need distinct nodes (spec.placement.hosts), and ``Any`` releases it.
"""

import re

import pytest

from mesh_client._src import contract
from procmesh_operator import ganging
from tests.cluster import binaries, testing
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import admin_client, started_cluster
from tests.integration.operator import gang_checks, support

pytestmark = pytest.mark.cluster

GPU_NODE = "gpu-units"
STALL_SECONDS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Overrides the session cluster for this module: one without the PodGroup API."""
    with started_cluster(tmp_path_factory.mktemp("no-gang"), NodeConfig("node-0"),
                         binaries.CONTROL_PLANE, gang=False) as instance:
        instance.add_node(NodeConfig(GPU_NODE, gpus=2, gpu_replicas=3))
        yield instance


@pytest.fixture(scope="module")
def kube(cluster):
    with admin_client(cluster) as api_client:
        yield api_client


@pytest.fixture(scope="module")
def operator(cluster, tmp_path_factory):
    with support.operator_with_crd(cluster.kubeconfig, tmp_path_factory.mktemp("op"),
                                   "--gang-stall-seconds", str(STALL_SECONDS)) as op:
        yield op


@pytest.fixture
def place():
    return gang_checks.Place(GPU_NODE, {})


def test_the_cluster_does_not_serve_the_pod_group_api(kube, operator):
    from kubernetes import client

    groups = client.ApisApi(kube).get_api_versions().groups
    versions = {v.group_version for g in groups for v in g.versions}
    assert "scheduling.k8s.io/v1" in versions
    assert f"{ganging.POD_GROUP_GROUP}/{ganging.POD_GROUP_VERSION}" not in versions


def test_a_mesh_larger_than_the_node_holds_no_gpu(operator, custom, core, kube, namespace, place):
    gang_checks.mesh_larger_than_the_node_holds_nothing(custom, core, kube, namespace, place)
    pods = support.mesh_pods(core, namespace, "twelve")
    assert all([g.name for g in p.spec.scheduling_gates or []] == [contract.GANG_GATE]
               for p in pods)
    assert all(p.spec.scheduling_group is None for p in pods)
    released = support.mesh_pods(core, namespace, "six")
    assert all(not p.spec.scheduling_gates for p in released)
    assert "gang placement: gate" in operator.log.read_text()  # what --gang auto chose


def test_meshes_take_turns_without_deadlock(operator, custom, core, namespace, place):
    order = gang_checks.meshes_take_turns_without_deadlock(custom, core, namespace, place)
    assert sorted(order) == ["four-a", "four-b", "six"]


def test_priority_class_name_passes_through(operator, custom, core, kube, namespace, place):
    gang_checks.priority_passes_through(custom, core, kube, namespace, place)


def test_a_partly_placed_release_is_recreated_behind_the_gate(operator, custom, core, namespace,
                                                             place):
    # Every node is linux: one topology domain, so only one of the two pods can ever bind.
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {contract.MESH_LABEL: "apart"}},
        "topologyKey": "kubernetes.io/os"}]}}
    gang_checks.create(custom, namespace, "apart", 2, place, affinity=apart)
    def both():
        pods = support.mesh_pods(core, namespace, "apart")
        return pods if len(pods) == 2 else None
    first = {p.metadata.uid for p in testing.wait_for(both, "both pods created")}
    mesh = support.wait_condition(custom, namespace, "apart", "Scheduled", "False",
                                  "GangStalled")
    message = support.condition(mesh, "Scheduled")["message"]
    assert "1 of 2 released procs were bound" in message and "stayed unschedulable" in message

    def recreated_and_held():
        pods = support.mesh_pods(core, namespace, "apart")
        fresh = [p for p in pods if p.metadata.uid not in first
                 and p.metadata.deletion_timestamp is None]
        return len(fresh) == 2 and all(p.spec.scheduling_gates for p in fresh) and fresh
    fresh = testing.wait_for(recreated_and_held, "both pods recreated behind the gate")
    assert not any(p.spec.node_name for p in fresh)


def test_the_gate_keeps_hosts_on_distinct_nodes(operator, custom, core, namespace, place):
    # Only the GPU node has GPU units: a 2-host plugin mesh cannot get two nodes.
    support.create_mesh(custom, namespace, "hosts", hosts=2, perHost=[{"name": "gpus", "size": 1}],
                        gpus={"mode": "plugin"})
    mesh = support.wait_condition(custom, namespace, "hosts", "Scheduled", "False", "Unschedulable")
    message = support.condition(mesh, "Scheduled")["message"]
    assert re.search(rf"{GPU_NODE}: node\(s\) didn't match pod anti-affinity rules \(pod hosts-[01] "
                     r"is there\)", message), message
    pods = support.mesh_pods(core, namespace, "hosts")
    assert len(pods) == 2 and all(p.spec.scheduling_gates for p in pods)  # never released

    support.create_mesh(custom, namespace, "shared", hosts=2, perHost=[{"name": "gpus", "size": 1}],
                        gpus={"mode": "plugin"}, placement={"hosts": "Any"})
    support.wait_ready(custom, namespace, "shared")
    assert {p.spec.node_name for p in support.mesh_pods(core, namespace, "shared")} == {GPU_NODE}
