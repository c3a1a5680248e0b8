"""A mesh from before spec.placement (upgrading.py): its replacement pods are rendered as its
existing pods were, not as the CRD default that the API server now reads into it.

Aspects: a DistinctNodes mesh whose pods carry no host-spreading term is handled as Any (so a
restarted proc's pod gets no anti-affinity), one whose pods carry them stays DistinctNodes; with
no pod left the spec rules, unless the status recorded the placement its pods had (written
once, when first seen); pinned meshes tell by their pods' nodes; an Any mesh stays Any.
"""

from mesh_client._src import contract
from procmesh_operator import rendering, upgrading
from tests.unit.operator import builders

ANY = {"placement": {"hosts": "Any"}}


def spread(m, rank):
    pod = rendering.render_pod(m, rank, rendering.ProcPlacement(), builders.SETTINGS)
    return (pod["spec"].get("affinity") or {}).get("podAntiAffinity")


def test_pods_rendered_without_spreading_keep_a_mesh_unspread():
    now = builders.mesh("old", hosts=2, per_host=(("procs", 1),))  # read with the CRD default
    assert now.hosts_on_distinct_nodes
    before = builders.mesh("old", hosts=2, per_host=(("procs", 1),), **ANY)  # how its pods were made
    survivors = {0: builders.pod(before, 0)}  # rank 1 died: its pod is to be made again
    rendered = upgrading.as_rendered(now, survivors)
    assert rendered.host_placement == contract.HOSTS_ON_ANY_NODES
    assert spread(rendered, 1) is None and spread(now, 1) is not None


def test_pods_rendered_with_spreading_keep_the_spec():
    m = builders.mesh("new", hosts=2, per_host=(("procs", 2),))
    assert upgrading.as_rendered(m, {0: builders.pod(m, 0), 3: builders.pod(m, 3)}) is m


def test_without_pods_the_spec_rules():
    m = builders.mesh("gone", hosts=2)
    assert upgrading.as_rendered(m, {}) is m


def test_the_recorded_placement_outlives_the_pods():
    now = builders.mesh("old", hosts=2, per_host=(("procs", 1),))
    before = builders.mesh("old", hosts=2, per_host=(("procs", 1),), **ANY)
    rendered = upgrading.as_rendered(now, {0: builders.pod(before, 0)})
    assert upgrading.to_record(now, rendered, None) == contract.HOSTS_ON_ANY_NODES  # first seen: record it
    assert upgrading.to_record(now, rendered, contract.HOSTS_ON_ANY_NODES) is None  # written once
    assert upgrading.to_record(now, now, None) is None  # nothing differs: nothing to record
    again = upgrading.as_rendered(now, {}, contract.HOSTS_ON_ANY_NODES)  # every pod gone
    assert again.host_placement == contract.HOSTS_ON_ANY_NODES and spread(again, 1) is None


def test_an_any_mesh_stays_any():
    m = builders.mesh("any", hosts=2, **ANY)
    assert upgrading.as_rendered(m, {0: builders.pod(m, 0)}) is m


def test_pinned_meshes_tell_by_their_pods_nodes():
    gpus = {"mode": "pinned", "deviceIDs": [0]}
    m = builders.mesh("pin", hosts=2, per_host=(("gpus", 1),), gpus=gpus)
    apart = {0: builders.pod(m, 0, node="n1", placement=rendering.ProcPlacement(node="n1", device="0")),
             1: builders.pod(m, 1, node="n2", placement=rendering.ProcPlacement(node="n2", device="0"))}
    assert upgrading.as_rendered(m, apart) is m
    shared = {0: builders.pod(m, 0, node="n1", placement=rendering.ProcPlacement(node="n1", device="0")),
              1: builders.pod(m, 1, node="n1", placement=rendering.ProcPlacement(node="n1", device="0"))}
    assert upgrading.as_rendered(m, shared).host_placement == contract.HOSTS_ON_ANY_NODES


def test_the_reconcile_makes_a_restarted_procs_pod_like_its_mesh_s_others():
    import asyncio

    from .test_reconciling import MESH_PATH, controller

    for before, expect_spread in ((builders.mesh("m", hosts=2, per_host=(("procs", 1),), **ANY), False),
                                  (builders.mesh("m", hosts=2, per_host=(("procs", 1),)), True)):
        body = builders.mesh_body("m", hosts=2, per_host=(("procs", 1),))  # read as DistinctNodes
        ctl, client = controller({MESH_PATH: body, "/api/v1/namespaces/ns/pods/m-0": builders.pod(before, 0)})
        asyncio.run(ctl.reconcile(("ns", "m")))
        made = client.objects["/api/v1/namespaces/ns/pods/m-1"]
        assert ("podAntiAffinity" in (made["spec"].get("affinity") or {})) is expect_spread
