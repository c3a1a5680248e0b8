"""A pinned mesh's host whose node became unfit after it was placed (cordoned, or given a taint
its pods do not tolerate): a replacement proc of that host has nowhere else to go, since the
host's other procs run on that node, so it waits for the node (WaitingForNode, the cordon or the
taint named as the scheduler words it, no pod for it) and is created there once the node is fit
again (the node's change wakes it: no resync runs). Its pod had gone to the node at once and sat
Pending there, its affinity naming that node alone. A GPU node of this module sorts before the
session's gpu-node, so first fit by name comes to it first.

Aspects: the replacement of a killed proc on a node cordoned since waits and is created once
the node is uncordoned; likewise on a node tainted since, once the taint is lifted; a new mesh
does not go to a cordoned node.
"""

import uuid

import pytest

from mesh_client._src import contract
from tests.cluster import testing
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import support

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("devices_free")]

GPUS_2 = [{"name": "gpus", "size": 2}]
PINNED = {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4}


@pytest.fixture(scope="module")
def own_node(cluster, kube):
    """(a GPU node of this module's, a label key only it has); gone afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(kube)
    key = f"procmesh.io/test-unfit-{uuid.uuid4().hex[:6]}"
    name = f"gpu-a-unfit-{key[-6:]}"  # before gpu-node by name
    cluster.add_node(NodeConfig(name, gpus=2, labels={key: "yes"}))
    # Ready is not enough: the node controller lifts the not-ready NoSchedule taint a little later.
    testing.wait_for(lambda: not core.read_node(name).spec.taints, f"node {name} untainted")
    try:
        yield name, key
    finally:
        cluster.kill_node(name)
        core.delete_node(name)


def make_unfit(core, name, key, how, unfit):
    """Cordon (``how`` "cordoned") or taint the node, or undo it."""
    def change(node):
        if how == "cordoned":
            node.spec.unschedulable = unfit or None
        else:
            support.with_taint(node, key, unfit)

    support.edit_node(core, name, change, f"node {name} {how if unfit else 'fit again'}")


nodes_of = support.nodes_of


@pytest.fixture
def eventful_operator(operator):
    """The session operator without resync and without gang placement, whose own wake-ups
    would hide a missing one (as in test_gpus.py)."""
    with support.session_operator_with(operator, "--resync-seconds", "3600",
                                       "--gang", "off") as restarted:
        yield restarted


@pytest.mark.parametrize("how", ["cordoned", "tainted"])
def test_a_replacement_waits_for_its_hosts_node_to_be_fit_again(
        eventful_operator, namespace, custom, core, own_node, how):
    node, key = own_node
    name = f"unfit-{how[:3]}"
    support.create_mesh(custom, namespace, name, perHost=GPUS_2, gpus=PINNED,
                        restartPolicy="RestartProc", maxRestarts=3,
                        template={"nodeSelector": {key: "yes"}})
    mesh = support.wait_ready(custom, namespace, name)
    assert nodes_of(mesh) == {node}
    first = core.read_namespaced_pod(f"{name}-0", namespace).metadata.uid
    make_unfit(core, node, key, how, True)
    try:
        support.kill_proc(mesh["status"]["procs"][1]["address"], support.token(core, namespace, name))
        mesh = support.wait_condition(custom, namespace, name, "Progressing", "True",
                                      contract.WAITING_FOR_NODE)
        message = support.condition(mesh, "Ready")["message"]
        said = "unschedulable (cordoned)" if how == "cordoned" else f"untolerated taint {key}"
        assert f"its node {node}, where its other procs run: {said}" in message, message
        # Rank 0 runs on; rank 1 has no pod to sit Pending on the node.
        assert [p.metadata.name for p in support.mesh_pods(core, namespace, name)] == [f"{name}-0"]
    finally:
        make_unfit(core, node, key, how, False)
    # No resync runs: the node's change is what creates the replacement.
    mesh = support.wait_ready(custom, namespace, name)
    assert nodes_of(mesh) == {node}
    assert mesh["status"]["restarts"] == 1
    assert core.read_namespaced_pod(f"{name}-0", namespace).metadata.uid == first


def test_a_new_mesh_does_not_go_to_a_cordoned_node(operator, namespace, custom, core, own_node):
    node, key = own_node
    make_unfit(core, node, key, "cordoned", True)
    try:
        support.create_mesh(custom, namespace, "beside", perHost=GPUS_2, gpus=PINNED,
                            template={"nodeSelector": {key: "yes"}})
        mesh = support.wait_condition(custom, namespace, "beside", "Progressing", "True",
                                      contract.WAITING_FOR_NODE)
        assert f"{node}: unschedulable (cordoned)" in support.condition(mesh, "Ready")["message"]
        assert support.mesh_pods(core, namespace, "beside") == []
    finally:
        make_unfit(core, node, key, "cordoned", False)
    assert nodes_of(support.wait_ready(custom, namespace, "beside")) == {node}
