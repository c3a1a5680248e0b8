"""Meshes on KWOK's fake nodes: the harness works, and a big mesh reports its procs as a table.

Aspects: KWOK's nodes are Ready and a mesh of a few procs placed there becomes Ready from pod
status alone, every pod bound to a fake node with a pod IP of KWOK's loopback range; a mesh of
more than contract.MAX_LISTED_PROCS procs becomes Ready with an empty status.procs and a
status.procTable that the client reads back as every proc, ready, with its node and address;
the client's wait for Ready (the first half of attach) accepts it; reconciles of a Ready mesh that
change nothing write no status. Nothing connects to a proc: KWOK pods run no process.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from mesh_client._src import contract
from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes import attaching
from tests.cluster import controlplane, testing
from tests.cluster.kwok import fixtures, simulator
from tests.cluster.kwok.fixtures import kwok_cluster  # noqa: F401 - a fixture, found by name
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

KWOK_RANGE = ipaddress.ip_network(simulator.POD_CIDR, strict=False)


@pytest.fixture(scope="module")
def kwok_operator(kwok_cluster: controlplane.Cluster,  # noqa: F811 - the fixture imported above
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.OperatorProcess]:
    """The CRD installed and the operator running on the KWOK cluster (the only one there)."""
    with support.operator_with_crd(kwok_cluster.kubeconfig, tmp_path_factory.mktemp("op")) as op:
        yield op


@pytest.fixture(scope="module")
def kwok_api(kwok_cluster: controlplane.Cluster,  # noqa: F811 - the fixture imported above
             kwok_operator: support.OperatorProcess) -> Iterator[Any]:
    """An admin client of the KWOK cluster, with the CRD installed and the operator running."""
    api = config.new_client_from_config(str(kwok_cluster.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def kwok_namespace(kwok_api: Any) -> Iterator[str]:
    core = client.CoreV1Api(kwok_api)
    name = _fresh_name()
    core.create_namespace({"metadata": {"name": name}})
    testing.wait_for(lambda: core.read_namespaced_service_account("default", name),
                     "default service account")
    yield name
    core.delete_namespace(name)


def _fresh_name() -> str:
    import uuid

    return f"k-{uuid.uuid4().hex[:8]}"


def on_kwok(**spec: Any) -> dict[str, Any]:
    """A mesh spec whose pods go to the fake nodes only."""
    return {**spec, "template": {"nodeSelector": simulator.node_selector(),
                                 "tolerations": [simulator.toleration()]}}


def test_a_small_mesh_on_kwok_nodes_becomes_ready(kwok_api, kwok_namespace):
    custom, core = client.CustomObjectsApi(kwok_api), client.CoreV1Api(kwok_api)
    support.create_mesh(custom, kwok_namespace, "few",
                        **on_kwok(hosts=3, perHost=[{"name": "procs", "size": 2}]))
    mesh = support.wait_ready(custom, kwok_namespace, "few")
    pods = support.mesh_pods(core, kwok_namespace, "few")
    assert len(pods) == 6
    assert {p.spec.node_name for p in pods} <= set(fixtures.NODES)
    procs = mesh["status"]["procs"]
    assert [p["rank"] for p in procs] == list(range(6)) and all(p["ready"] for p in procs)
    for proc in procs:
        host, _, port = proc["address"].rpartition(":")
        assert ipaddress.ip_address(host) in KWOK_RANGE and int(port) == contract.PROC_PORT
        assert proc["node"] in fixtures.NODES


def test_a_big_mesh_reports_a_table_that_attach_reads(kwok_api, kwok_namespace):
    custom, core = client.CustomObjectsApi(kwok_api), client.CoreV1Api(kwok_api)
    hosts, per_host = 3, 100
    assert hosts * per_host > contract.MAX_LISTED_PROCS
    support.create_mesh(custom, kwok_namespace, "big",
                        **on_kwok(hosts=hosts, perHost=[{"name": "procs", "size": per_host}]))
    mesh = support.wait_ready(custom, kwok_namespace, "big")
    assert mesh["status"]["procs"] == [] and mesh["status"]["procTable"]["size"] == 300
    procs = contract.status_procs(mesh)
    pods = {p.metadata.name: p for p in support.mesh_pods(core, kwok_namespace, "big")}
    assert [p["rank"] for p in procs] == list(range(300)) and all(p["ready"] for p in procs)
    for proc in procs:
        pod = pods[proc["pod"]]
        assert proc["node"] == pod.spec.node_name and proc["node"] in fixtures.NODES
        assert proc["address"] == f"{pod.status.pod_ip}:{contract.PROC_PORT}"
        assert proc["coords"] == contract.coords_of(proc["rank"], [("hosts", hosts),
                                                                   ("procs", per_host)])
    api = api_mod.KubeApi(kwok_api, kwok_namespace)
    assert attaching.wait_ready(api, "big", timeout=60, progress=False)["status"]["procTable"]


def _count(operator: support.OperatorProcess, name: str, **labels: str) -> float:
    """The sum of the operator's samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(s.value for family in text_string_to_metric_families(operator.metrics())
               for s in family.samples if s.name == name and wanted <= set(s.labels.items()))


def _reconciles(operator: support.OperatorProcess) -> float:
    return _count(operator, "procmesh_reconcile_duration_seconds_count")


def _status_writes(operator: support.OperatorProcess) -> float:
    return _count(operator, "procmesh_api_requests_total", verb="patch",
                  resource=f"{contract.PLURAL}/status")


def test_reconciles_that_change_nothing_write_no_status(kwok_api, kwok_operator, kwok_namespace):
    """A Ready mesh is reconciled again at each change of its metadata (an annotation: a new
    resourceVersion, not the echo of a status write); its status is the same, so the operator
    writes none, until a change of its spec (generation 2) is written, once."""
    custom = client.CustomObjectsApi(kwok_api)
    support.create_mesh(custom, kwok_namespace, "still",
                        **on_kwok(hosts=2, perHost=[{"name": "procs", "size": 2}]))
    support.wait_ready(custom, kwok_namespace, "still")
    # Settled: the last progress write of its start (coalescing.py) is out before we count. The
    # counters are the operator's, over every mesh; this mesh's own writes show in its
    # resourceVersion, which is what is compared (a mesh of an earlier test, its namespace
    # going, may still be written meanwhile).
    testing.wait_for(lambda: (support.get_mesh(custom, kwok_namespace, "still")["status"].get("readyProcs")
                              == 4), "every proc Ready in status")
    for i in range(3):
        before = _reconciles(kwok_operator)
        patched = custom.patch_namespaced_custom_object(
            contract.GROUP, contract.VERSION, kwok_namespace, contract.PLURAL, "still",
            {"metadata": {"annotations": {"example.com/touch": str(i)}}})
        testing.wait_for(lambda before=before: _reconciles(kwok_operator) > before,
                         "a reconcile after the annotation")
        now = support.get_mesh(custom, kwok_namespace, "still")
        assert now["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"], now["status"]
    writes = _status_writes(kwok_operator)
    support.patch_mesh(custom, kwok_namespace, "still", {"maxRestarts": 7})
    mesh = support.wait_condition(custom, kwok_namespace, "still", contract.READY, "True")
    assert mesh["metadata"]["generation"] == mesh["status"]["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 for c in mesh["status"]["conditions"])
    assert _status_writes(kwok_operator) >= writes + 1
