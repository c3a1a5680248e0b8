"""A process node dies with procs on it (its agent and pods SIGKILLed, the Node object left
behind, as with a lost machine): the mesh reports NodeLost in its Ready condition once the node
controller marks the node (after its grace), and its procs come back on a live node per
restartPolicy after their toleration, not Kubernetes' default 5 minutes: the pods on the dead
node are force-deleted by the operator. The mesh's template carries its own, shorter toleration
for the unreachable taint, which wins over the operator's default.

Every node silent at once (cut off from the control plane, or an API server away longer than the
nodes' grace) is not node loss: the node controller lifts its taints and evicts nothing, and the
operator holds the procs likewise, however long it lasts.
"""

import datetime
import time

import pytest

from tests.cluster import testing
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

TOLERATION_SECONDS = 5


def prefer(node: str) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}


@pytest.fixture
def doomed_node(cluster, core, request):
    name = f"doomed-{request.node.callspec.id.lower()}"
    cluster.add_node(NodeConfig(name))
    # Ready is not enough: the node controller lifts the not-ready NoSchedule taint a little later.
    testing.wait_for(lambda: not core.read_node(name).spec.taints, f"node {name} untainted")
    try:
        yield name
    finally:
        cluster.kill_node(name)
        core.delete_node(name)


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_procs_on_a_lost_node_restart_elsewhere(cluster, operator, namespace, custom, core,
                                                doomed_node, policy):
    toleration = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                  "effect": "NoExecute", "tolerationSeconds": TOLERATION_SECONDS}
    support.create_mesh(custom, namespace, "lossy", perHost=[{"name": "procs", "size": 2}],
                        restartPolicy=policy, maxRestarts=3,
                        template={"affinity": prefer(doomed_node), "tolerations": [toleration]})
    mesh = support.wait_ready(custom, namespace, "lossy")
    assert [p["node"] for p in mesh["status"]["procs"]] == [doomed_node] * 2
    [pod] = support.mesh_pods(core, namespace, "lossy")[:1]
    tolerations = {t.key: t.toleration_seconds for t in pod.spec.tolerations}
    assert tolerations["node.kubernetes.io/unreachable"] == TOLERATION_SECONDS
    # The operator's own: without end for the taint eviction controller; it counts 30 s itself.
    assert tolerations["node.kubernetes.io/not-ready"] is None
    assert pod.metadata.annotations["procmesh.io/node-loss-toleration-seconds"] == \
        "node.kubernetes.io/not-ready=30"

    cluster.kill_node(doomed_node)
    mesh = support.wait_condition(custom, namespace, "lossy", "Ready", "False", "NodeLost")
    assert doomed_node in support.condition(mesh, "Ready")["message"]

    def elsewhere_and_ready():
        m = support.get_mesh(custom, namespace, "lossy")
        ready = support.condition(m, "Ready").get("status") == "True"
        nodes = {p.get("node") for p in m["status"]["procs"]}
        return m if ready and doomed_node not in nodes else None

    mesh = testing.wait_for(elsewhere_and_ready, "procs Ready again on a live node")
    # RestartProc counts each lost proc, RestartMesh the one restart of the whole mesh.
    assert mesh["status"]["restarts"] == (2 if policy == "RestartProc" else 1)
    pods = support.mesh_pods(core, namespace, "lossy")
    assert sorted(p.metadata.name for p in pods) == ["lossy-0", "lossy-1"]
    assert all(p.spec.node_name != doomed_node for p in pods)
    # The mesh still works: a new proc answers the authenticated IDENTIFY request.
    support.identify(mesh["status"]["procs"][0]["address"], support.token(core, namespace, "lossy"))


def _ready_since(node) -> float | None:
    """When the node's Ready condition last changed, if it is not True (epoch seconds)."""
    for c in node.status.conditions or []:
        if c.type == "Ready" and c.status != "True":
            return c.last_transition_time.timestamp()
    return None


def test_every_node_silent_at_once_holds_the_procs(cluster, operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "held", perHost=[{"name": "procs", "size": 2}],
                        restartPolicy="RestartProc", maxRestarts=3)
    support.wait_ready(custom, namespace, "held")
    pods = {p.metadata.name: p.metadata.uid for p in support.mesh_pods(core, namespace, "held")}
    on = {p.spec.node_name for p in support.mesh_pods(core, namespace, "held")}

    with cluster.nodes_silenced():
        def disrupted():
            nodes = core.list_node().items
            ready = [n.metadata.name for n in nodes if _ready_since(n) is None]
            assert not ready, f"still Ready: {ready}"
            return nodes

        # The node controller's master disruption mode: every node Unknown. It lifts its taints,
        # but v1.36 may leave one (its tainting worker races the lifting): the operator holds
        # that node's procs too, and their pods tolerate it without end.
        nodes = testing.wait_for(disrupted, "every node Unknown")

        def held():
            m = support.get_mesh(custom, namespace, "held")
            ready = support.condition(m, "Ready")
            return m if ready.get("reason") == "NodeLost" and "held on" in ready["message"] else None

        testing.wait_for(held, "the mesh reporting its procs held on their silent nodes")
        # Past the procs' toleration (the operator's 30 s), counted from when their nodes turned
        # Unknown: a ProcMesh that counted from there would have restarted them by now.
        deadline = max(_ready_since(n) for n in nodes if n.metadata.name in on) + 30 + 10
        time.sleep(max(0.0, deadline - time.time()))
        mesh = testing.wait_for(held, "the procs still held past their toleration")
        assert mesh["status"]["restarts"] == 0
        assert {p.metadata.name: p.metadata.uid
                for p in support.mesh_pods(core, namespace, "held")} == pods
        assert datetime.datetime.now().timestamp() > deadline

    mesh = support.wait_ready(custom, namespace, "held")
    assert mesh["status"]["restarts"] == 0
    assert {p.metadata.name: p.metadata.uid
            for p in support.mesh_pods(core, namespace, "held")} == pods
