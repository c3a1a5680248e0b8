"""Hosts are machines (issue 15 item 11), against the real kube-scheduler: a mesh's hosts land on
distinct nodes, each host's procs on one node, on two process nodes that only this module's
meshes tolerate.

Aspects: a 2-host mesh lands on the two nodes, one host each; confined to one node it stays
Pending with the scheduler's reason in its Scheduled condition; ``placement.hosts: Any`` puts
both hosts on that one node (and cannot be changed afterwards), and so does the Python client's ``hosts_on_distinct_nodes=False``;
a mesh colocated with a spread mesh lands beside it, proc by proc (the anti-affinity matches its
own mesh's pods only); a mesh whose pods an operator from before ``spec.placement`` made (both
hosts on one node, no host terms) gets its restarted proc's pod rendered like them, so it runs
beside them instead of staying Pending, and, its placement recorded in its status, every pod of
it made anew after a suspension lands there too; ``kubectl explain`` teaches the field.
"""

import uuid

import pytest

from tests.cluster import testing
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def pair(cluster):
    """Two nodes, ``a`` and ``b``, labelled for this module (``a`` also as the solo node) and
    tainted so that no other test's pod lands there. Returns (names, template of the pair,
    template of the solo node)."""
    key = f"procmesh.io/test-spread-{uuid.uuid4().hex[:6]}"
    names = [f"spread-{side}-{key[-6:]}" for side in ("a", "b")]
    taint = {"key": key, "value": "yes", "effect": "NoSchedule"}
    cluster.add_node(NodeConfig(names[0], labels={key: "pair", f"{key}-solo": "yes"},
                                taints=(taint,)))
    cluster.add_node(NodeConfig(names[1], labels={key: "pair"}, taints=(taint,)))
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]
    return (names, {"nodeSelector": {key: "pair"}, "tolerations": tolerations},
            {"nodeSelector": {f"{key}-solo": "yes"}, "tolerations": tolerations})


def nodes_by_host(core, namespace, name):
    """host index -> the set of nodes its live pods are bound to."""
    out: dict[int, set[str]] = {}
    for pod in support.mesh_pods(core, namespace, name):
        if pod.metadata.deletion_timestamp is None:
            host = int(pod.metadata.labels["coord.procmesh.io/hosts"])
            out.setdefault(host, set()).add(pod.spec.node_name)
    return out


def create(custom, namespace, name, template, **spec):
    support.create_mesh(custom, namespace, name, hosts=2, perHost=[{"name": "procs", "size": 2}],
                        template=template, **spec)


def test_two_hosts_land_on_two_nodes_one_each(operator, custom, core, namespace, pair):
    names, on_pair, _ = pair
    create(custom, namespace, "spread", on_pair)
    mesh = support.wait_ready(custom, namespace, "spread")
    by_host = nodes_by_host(core, namespace, "spread")
    assert all(len(nodes) == 1 for nodes in by_host.values()), by_host  # a host's procs together
    assert sorted(n for nodes in by_host.values() for n in nodes) == sorted(names), by_host
    assert {p["node"] for p in mesh["status"]["procs"]} == set(names)


def test_on_one_node_the_second_host_stays_pending_with_the_schedulers_reason(
        operator, custom, core, namespace, pair):
    names, _, on_solo = pair
    create(custom, namespace, "lonely", on_solo)

    def held():
        mesh = support.get_mesh(custom, namespace, "lonely")
        c = support.condition(mesh, "Scheduled")
        pods = support.mesh_pods(core, namespace, "lonely")
        ok = c.get("status") == "False" \
            and "didn't match pod anti-affinity rules" in c.get("message", "") \
            and len(pods) == 4
        return (mesh, c, pods) if ok else None

    mesh, scheduled, pods = testing.wait_for(held, "lonely held for its anti-affinity")
    assert scheduled["reason"] == "Unschedulable", scheduled
    assert support.condition(mesh, "Ready")["status"] == "False"
    # Host 1 never joins host 0 on the one node (in PodGroup mode the gang holds all four).
    assert not [p for p in pods if p.spec.node_name
                and p.metadata.labels["coord.procmesh.io/hosts"] == "1"]
    assert {p.spec.node_name for p in pods if p.spec.node_name} <= {names[0]}


def test_any_lets_both_hosts_share_one_node(operator, custom, core, namespace, pair):
    names, _, on_solo = pair
    create(custom, namespace, "packed", on_solo, placement={"hosts": "Any"})
    support.wait_ready(custom, namespace, "packed")
    assert nodes_by_host(core, namespace, "packed") == {0: {names[0]}, 1: {names[0]}}
    # Running procs cannot follow a change of placement: the API server refuses it.
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException, match="placement is immutable"):
        support.patch_mesh(custom, namespace, "packed", {"placement": {"hosts": "DistinctNodes"}})


def test_a_colocated_mesh_lands_beside_its_spread_partner(operator, custom, core, namespace, pair):
    _, on_pair, _ = pair
    create(custom, namespace, "base", on_pair)
    create(custom, namespace, "beside", on_pair, colocateWith="base")
    base = support.wait_ready(custom, namespace, "base")
    beside = support.wait_ready(custom, namespace, "beside")
    assert [p["node"] for p in beside["status"]["procs"]] == \
        [p["node"] for p in base["status"]["procs"]]
    assert len({p["node"] for p in base["status"]["procs"]}) == 2


def make_legacy(operator, custom, core, namespace, on_solo, name):
    """A 2-host mesh whose pods an operator from before spec.placement made, on the solo node;
    once Ready under the current operator."""
    support.create_mesh(custom, namespace, name, hosts=2, perHost=[{"name": "procs", "size": 1}],
                        template=on_solo, restartPolicy="RestartProc", maxRestarts=2)
    testing.wait_for(lambda: len(support.mesh_pods(core, namespace, name)) == 2,
                     f"{name}'s pods made (so its Secret exists)")
    # Its pods as an operator before spec.placement made them: the same pods (gang membership
    # included) without the host terms, so both hosts go to the one node.
    operator.stop()
    try:
        made = [core.api_client.sanitize_for_serialization(p) for p in support.mesh_pods(core, namespace, name)]
        for pod in made:
            core.delete_namespaced_pod(pod["metadata"]["name"], namespace, grace_period_seconds=0)
        testing.wait_for(lambda: not support.mesh_pods(core, namespace, name), f"{name}'s pods gone")
        for pod in made:
            pod["spec"].pop("affinity", None)  # the mesh asks for no affinity of its own
            pod["spec"].pop("nodeName", None)
            pod.pop("status", None)
            pod["metadata"] = {k: v for k, v in pod["metadata"].items()
                               if k in ("name", "labels", "annotations", "ownerReferences")}
            core.create_namespaced_pod(namespace, pod)
    finally:
        operator.start()
    return support.wait_ready(custom, namespace, name)


def test_a_mesh_from_before_placement_restarts_its_proc_like_its_pods(operator, custom, core, namespace, pair):
    names, _, on_solo = pair
    mesh = make_legacy(operator, custom, core, namespace, on_solo, "legacy")
    assert nodes_by_host(core, namespace, "legacy") == {0: {names[0]}, 1: {names[0]}}

    support.kill_proc(mesh["status"]["procs"][1]["address"], support.token(core, namespace, "legacy"))

    def restarted():
        m = support.get_mesh(custom, namespace, "legacy")
        ready = support.condition(m, "Ready")
        fresh = ready.get("observedGeneration") == m["metadata"]["generation"]
        return m if fresh and ready.get("status") == "True" and m["status"].get("restarts") == 1 else None

    try:
        testing.wait_for(restarted, "legacy's proc 1 restarted beside proc 0 and the mesh Ready")
    except testing.WaitTimeout:
        pods = [(p.metadata.name, p.status.phase, p.spec.node_name, p.spec.affinity, p.spec.scheduling_gates)
                for p in support.mesh_pods(core, namespace, "legacy")]
        raise AssertionError(f"{support.get_mesh(custom, namespace, 'legacy')['status']}\n{pods}") from None
    assert nodes_by_host(core, namespace, "legacy") == {0: {names[0]}, 1: {names[0]}}


def test_a_mesh_from_before_placement_with_no_pods_left_renders_as_before(operator, custom, core, namespace, pair):
    names, _, on_solo = pair
    make_legacy(operator, custom, core, namespace, on_solo, "bygone")
    recorded = lambda: support.get_mesh(custom, namespace, "bygone")["status"].get("renderedHostPlacement")  # noqa: E731
    testing.wait_for(lambda: recorded() == "Any", "the placement its pods had recorded in its status")
    support.patch_mesh(custom, namespace, "bygone", {"suspend": True})
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "bygone"), "bygone's pods gone while suspended")
    support.patch_mesh(custom, namespace, "bygone", {"suspend": False})  # every pod made anew

    def ready():
        m = support.get_mesh(custom, namespace, "bygone")
        c = support.condition(m, "Ready")
        return m if c.get("status") == "True" and c.get("observedGeneration") == m["metadata"]["generation"] else None

    try:
        testing.wait_for(ready, "bygone Ready again, both hosts on the one node as before")
    except testing.WaitTimeout:
        pods = [(p.metadata.name, p.status.phase, p.spec.node_name, p.spec.affinity)
                for p in support.mesh_pods(core, namespace, "bygone")]
        raise AssertionError(f"{support.get_mesh(custom, namespace, 'bygone')['status']}\n{pods}") from None
    assert nodes_by_host(core, namespace, "bygone") == {0: {names[0]}, 1: {names[0]}}
    assert recorded() == "Any"


def test_explain_teaches_the_placement(cluster, crd):
    out = support.kubectl(cluster, "explain", "procmesh.spec.placement.hosts").stdout
    assert "DistinctNodes" in out and "anti-affinity" in out and "Any" in out


def test_the_python_client_can_let_hosts_share_a_node(operator, kube, core, namespace, pair):
    from mesh_client.kubernetes import KubernetesHostMesh

    names, _, on_solo = pair
    hosts = KubernetesHostMesh(hosts=2, namespace=namespace, api_client=kube, template=on_solo,
                               hosts_on_distinct_nodes=False, forward_output=False)
    procs = hosts.spawn_procs(per_host={"procs": 1}, name="shared")
    try:
        assert procs.sizes == {"hosts": 2, "procs": 1}
        assert nodes_by_host(core, namespace, "shared") == {0: {names[0]}, 1: {names[0]}}
    finally:
        procs.stop().get()
