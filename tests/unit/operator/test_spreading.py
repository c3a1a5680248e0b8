"""Hosts are machines (spreading.py, through render_pod and placing): which pods get which
inter-pod terms, and the gang fit check (fitting.py with interpod.py) that honours them.

Aspects: a 2-host none/plugin mesh repels its other hosts' pods and attracts its own host's; the
terms select this mesh only; dra gets the anti-affinity only (its claim keeps a host together);
pinned, colocated, one-host-one-proc and ``placement.hosts: Any`` meshes get none; user affinity
terms are kept; pinned placement puts two hosts on one node only under Any; the fit check places
a 2-host gang on two nodes, refuses it on one with the scheduler's words, and lets Any share.
"""

import pytest

from mesh_client._src import contract
from procmesh_operator import fitting, interpod, placing, rendering, spreading
from tests.unit.operator import builders

HOST = contract.coord_label("hosts")
ANY = {"placement": {"hosts": "Any"}}


def terms(m, rank):
    pod = rendering.render_pod(m, rank, rendering.ProcPlacement(), builders.SETTINGS)
    return pod["spec"].get("affinity") or {}


@pytest.mark.parametrize("mode", ["none", "plugin"])
def test_hosts_repel_each_other_and_a_host_keeps_together(mode):
    m = builders.mesh("two", hosts=2, per_host=(("procs", 2),), gpus={"mode": mode})
    affinity = terms(m, 3)  # host 1
    anti, = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchExpressions"] == [
        {"key": contract.MESH_LABEL, "operator": "In", "values": ["two"]},
        {"key": HOST, "operator": "NotIn", "values": ["1"]}]
    together, = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert together["labelSelector"] == {"matchLabels": {contract.MESH_LABEL: "two", HOST: "1"}}
    assert together["topologyKey"] == "kubernetes.io/hostname"


def test_dra_needs_only_the_anti_affinity():
    m = builders.mesh("d", hosts=2, gpus={"mode": "dra", "deviceClassName": "gpu.nvidia.com"})
    assert set(terms(m, 0)) == {"podAntiAffinity"}


@pytest.mark.parametrize("kw", [
    {"hosts": 2, "gpus": {"mode": "pinned", "deviceIDs": [0, 1]}},  # placing picks the nodes
    {"hosts": 2, "colocateWith": "other"},  # follows its partner
    {"hosts": 2, **ANY},
    {"hosts": 1, "per_host": (("procs", 1),)},
])
def test_meshes_that_get_no_terms(kw):
    assert terms(builders.mesh("m", **kw), 0) == {}


def test_one_host_keeps_its_procs_together_without_anti_affinity():
    assert set(terms(builders.mesh("m", hosts=1, per_host=(("procs", 3),)), 2)) == {"podAffinity"}


def test_user_terms_are_kept_beside_ours():
    user = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]},
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    m = builders.mesh("m", hosts=2, per_host=(("procs", 1),), template={"affinity": user})
    affinity = terms(m, 0)
    required = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["topologyKey"] for t in required] == ["zone", spreading.HOSTNAME_TOPOLOGY_KEY]
    assert "nodeAffinity" in affinity
    assert len(user["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]) == 1


@pytest.mark.parametrize(("spec", "expected"), [({}, {"a", "b"}), (ANY, {"a"})])
def test_pinned_hosts_share_a_node_only_under_any(spec, expected):
    m = builders.mesh("p", hosts=2, per_host=(("gpus", 1),),
                      gpus={"mode": "pinned", "deviceIDs": [0], "memoryFraction": 0.2}, **spec)
    nodes = {n: builders.node(n) for n in ("a", "b")}
    placed = placing.place(m, [0, 1], own_pods={}, partner=None, partner_pods={}, nodes=nodes,
                           other_pods=[], settings=builders.SETTINGS)
    assert {p.node for p in placed.procs.values()} == expected


# --- The gang fit check -------------------------------------------------------------------------

def fit_node(name):
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def gang(**kw):
    m = builders.mesh("g", hosts=2, per_host=(("procs", 2),), **kw)
    out = []
    for rank in range(m.size):
        pod = rendering.render_pod(m, rank, rendering.ProcPlacement(), builders.SETTINGS)
        pod["metadata"]["uid"] = f"uid-{rank}"
        out.append(pod)
    return out


def test_the_fit_check_puts_two_hosts_on_two_nodes():
    assert fitting.fit(gang(), [fit_node("a"), fit_node("b")], []).fits


def test_the_fit_check_refuses_two_hosts_on_one_node_in_the_schedulers_words():
    verdict = fitting.fit(gang(), [fit_node("a")], [])
    assert not verdict.fits
    assert "only 2 fit" in verdict.message
    assert "didn't match pod anti-affinity rules (pod g-0 is there)" in verdict.message


def test_the_fit_check_keeps_a_host_together():
    # A bound proc of host 0 on b (a restart): its host's gated proc must go to b, not a.
    pods = gang()
    pods[0]["spec"]["nodeName"] = "b"
    pods[0]["status"] = {"phase": "Running"}
    space = fitting.rooms([fit_node("a"), fit_node("b")], [pods[0]])
    assert fitting.why_not(pods[1], space[0], space) == "node(s) didn't match pod affinity rules"
    assert fitting.why_not(pods[1], space[1], space) is None
    # An existing pod's anti-affinity is symmetric: even without terms of its own, a pod of
    # host 1 cannot join host 0 on b.
    del pods[2]["spec"]["affinity"]
    assert fitting.why_not(pods[2], space[1], space) == (
        "node(s) didn't satisfy existing pods anti-affinity rules (pod g-0 is there)")


def test_the_fit_check_lets_any_share_one_node():
    assert fitting.fit(gang(**ANY), [fit_node("a")], []).fits


def test_another_mesh_is_not_repelled():
    m = builders.mesh("other", hosts=2, per_host=(("procs", 2),))
    other = rendering.render_pod(m, 2, rendering.ProcPlacement(), builders.SETTINGS)
    other["metadata"]["uid"] = "uid-other"
    other["spec"]["nodeName"] = "a"
    other["status"] = {"phase": "Running"}
    # The other mesh's pod of host 1 neither repels nor attracts this mesh's host 0.
    space = fitting.rooms([fit_node("a")], [other])
    assert fitting.why_not(gang()[0], space[0], space) is None


# --- interpod.py's reading of terms ---------------------------------------------------------------

def labelled(name, namespace="ns", **labels):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_a_term_selects_its_own_namespace_unless_it_names_others():
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    owner = labelled("me", "ns")
    assert interpod._term_matches(term, owner, labelled("a", "ns", app="x"))
    assert not interpod._term_matches(term, owner, labelled("b", "other", app="x"))
    assert interpod._term_matches({**term, "namespaces": ["other"]}, owner,
                                  labelled("b", "other", app="x"))
    assert not interpod._term_matches({"topologyKey": "kubernetes.io/hostname"}, owner,
                                      labelled("a", "ns", app="x"))  # no selector: nothing


def test_the_index_narrows_by_an_equality_and_falls_back_to_all():
    placed = interpod.Placed([(labelled("a", app="x", tier="1"), "n1"),
                              (labelled("b", app="y", tier="1"), "n2")])
    by_app = {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["x"]}]}}
    assert [p["metadata"]["name"] for p in placed.candidates(by_app)] == ["a"]
    not_x = {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "NotIn", "values": ["x"]}]}}
    assert len(placed.candidates(not_x)) == 2
    assert placed.node_of(placed.candidates(by_app)[0]) == "n1"
