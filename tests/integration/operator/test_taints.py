"""Pinned placement and node taints: the operator picks a pinned mesh's nodes itself, so it must
skip a node whose NoSchedule taint the pods do not tolerate, as the kube-scheduler would (their
pods sat Unschedulable there). A GPU node of this module, tainted, sorts before the session's
gpu-node, so first fit by name comes to it first.

Aspects: a mesh that both nodes fit goes to the untainted one; a mesh only the tainted node fits
waits (WaitingForNode, the taint named as the scheduler words it, no pods) and is placed there
once the taint is lifted (the node's change wakes it: no resync runs), or once its template
comes to tolerate the taint; a template's required node affinity is judged too; a colocated mesh
that does not tolerate its partner's node waits, saying so. A Kueue
flavor's toleration is in test_kueue.py.
"""

import uuid

import pytest

from mesh_client._src import contract
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import support

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("devices_free")]

GPUS_2 = [{"name": "gpus", "size": 2}]
PINNED = {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4}


@pytest.fixture(scope="module")
def tainted(cluster, kube):
    """(the tainted GPU node's name, its taint: a label key only it has, too); gone afterwards."""
    from kubernetes import client

    key = f"procmesh.io/test-taint-{uuid.uuid4().hex[:6]}"
    name = f"gpu-a-taint-{key[-6:]}"  # before gpu-node by name
    cluster.add_node(NodeConfig(name, gpus=2, labels={key: "yes"},
                                taints=({"key": key, "value": "yes", "effect": "NoSchedule"},)))
    try:
        yield name, key
    finally:
        cluster.kill_node(name)
        client.CoreV1Api(kube).delete_node(name)


def set_taint(core, name, key, present):
    """Add or lift the node's taint ``key``."""
    support.edit_node(core, name, lambda node: support.with_taint(node, key, present),
                      f"node {name} {'tainted' if present else 'untainted'} {key}")


nodes_of = support.nodes_of


def wait_for_the_taint(custom, core, namespace, name, tainted):
    node, key = tainted
    mesh = support.wait_condition(custom, namespace, name, "Progressing", "True",
                                  contract.WAITING_FOR_NODE)
    assert mesh["status"]["phase"] == "Waiting"
    assert f"{node}: untolerated taint {key}" in support.condition(mesh, "Ready")["message"]
    assert support.mesh_pods(core, namespace, name) == []


def test_a_mesh_both_nodes_fit_goes_to_the_untainted_one(operator, namespace, custom, gpu_node,
                                                          tainted):
    support.create_mesh(custom, namespace, "plain", perHost=GPUS_2, gpus=PINNED)
    assert nodes_of(support.wait_ready(custom, namespace, "plain")) == {gpu_node}


@pytest.fixture
def eventful_operator(operator):
    """The session operator without resync and without gang placement, whose own wake-ups
    would hide a missing one (as in test_gpus.py)."""
    with support.session_operator_with(operator, "--resync-seconds", "3600",
                                       "--gang", "off") as restarted:
        yield restarted


def test_a_mesh_only_a_tainted_node_fits_waits_until_the_taint_is_lifted(
        eventful_operator, namespace, custom, core, tainted):
    node, key = tainted
    support.create_mesh(custom, namespace, "kept", perHost=GPUS_2, gpus=PINNED,
                        template={"nodeSelector": {key: "yes"}})
    wait_for_the_taint(custom, core, namespace, "kept", tainted)
    # A point after every earlier trigger (the echo of the operator's first status writes among
    # them): once the status says this edit is seen, nothing but the node's change can place it.
    support.patch_mesh(custom, namespace, "kept", {"template": {
        "nodeSelector": {key: "yes"}, "annotations": {"edited": "yes"}}})
    wait_for_the_taint(custom, core, namespace, "kept", tainted)  # of the new generation
    set_taint(core, node, key, present=False)
    try:
        # No resync runs: the node's change is what places it.
        assert nodes_of(support.wait_ready(custom, namespace, "kept")) == {node}
    finally:
        set_taint(core, node, key, present=True)


def test_a_waiting_mesh_whose_template_comes_to_tolerate_the_taint_goes_there(
        operator, namespace, custom, core, tainted):
    node, key = tainted
    support.create_mesh(custom, namespace, "edited", perHost=GPUS_2, gpus=PINNED,
                        template={"nodeSelector": {key: "yes"}})
    wait_for_the_taint(custom, core, namespace, "edited", tainted)
    toleration = {"key": key, "operator": "Exists", "effect": "NoSchedule"}
    support.patch_mesh(custom, namespace, "edited", {"template": {
        "nodeSelector": {key: "yes"}, "tolerations": [toleration]}})
    assert nodes_of(support.wait_ready(custom, namespace, "edited")) == {node}
    assert support.mesh_pods(core, namespace, "edited")[0].spec.tolerations[0].key == key


def test_a_required_node_affinity_is_judged_as_the_scheduler_does(operator, namespace, custom, gpu_node,
                                                                  tainted):
    """The tainted node comes first and its taint is tolerated, but the template's required node
    affinity names gpu-node: placed on the first node, the pods would sit Unschedulable (their
    affinity would name both)."""
    _, key = tainted
    toleration = {"key": key, "operator": "Exists", "effect": "NoSchedule"}
    support.create_mesh(custom, namespace, "affine", perHost=GPUS_2, gpus=PINNED, template={
        "tolerations": [toleration],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [gpu_node]}]}]}}}})
    assert nodes_of(support.wait_ready(custom, namespace, "affine")) == {gpu_node}


def test_a_colocated_mesh_that_does_not_tolerate_its_partners_node_waits_saying_so(
        operator, namespace, custom, core, tainted):
    """The policy tolerates the tainted node and runs there; the trainer colocated with it does
    not: its pods would sit Unschedulable beside the policy's, so it waits, told to add the
    toleration, and follows the policy once it has."""
    node, key = tainted
    toleration = {"key": key, "operator": "Exists", "effect": "NoSchedule"}
    support.create_mesh(custom, namespace, "policy", perHost=GPUS_2, gpus=PINNED,
                        template={"nodeSelector": {key: "yes"}, "tolerations": [toleration]})
    assert nodes_of(support.wait_ready(custom, namespace, "policy")) == {node}
    support.create_mesh(custom, namespace, "trainer", perHost=GPUS_2, colocateWith="policy",
                        gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4})
    mesh = support.wait_condition(custom, namespace, "trainer", "Progressing", "True",
                                  contract.WAITING_FOR_NODE)
    assert (f"must run on node {node}, beside ProcMesh 'policy''s, whose taint {key} this mesh's "
            "pods do not tolerate") in support.condition(mesh, "Ready")["message"]
    assert support.mesh_pods(core, namespace, "trainer") == []
    support.patch_mesh(custom, namespace, "trainer", {"template": {"tolerations": [toleration]}})
    assert nodes_of(support.wait_ready(custom, namespace, "trainer")) == {node}
