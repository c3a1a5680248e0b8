"""Metrics and liveness of the running operator: the values move with what the operator does.

Aspects: a reconcile adds to the reconcile histogram and the API request counter; the per-phase
gauge counts a mesh under Ready once it is Ready, and no longer once it is deleted.
"""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mesh_client._src import contract
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def samples(operator: support.OperatorProcess) -> dict[tuple[str, frozenset], float]:
    """Every sample of the operator's /metrics, by (name, labels)."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(operator.metrics())
            for s in family.samples}


def total(values: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in values.items() if n == name and wanted <= ls)


def ready_meshes(operator: support.OperatorProcess) -> float:
    return total(samples(operator), "procmesh_meshes", phase="Ready")


def gauge_matches(operator: support.OperatorProcess, custom, namespace: str, present: bool) -> bool:
    """The gauge's Ready count is the API's, with this test's mesh Ready in it (or gone).

    Other tests' meshes may be in the cluster, and change while this test runs (their
    namespaces are deleted in the background; some outlive their test): the gauge is checked
    against all of them, as the API lists them, not against a count taken before."""
    listed = custom.list_cluster_custom_object(contract.GROUP, contract.VERSION, contract.PLURAL)["items"]
    phases = {(m["metadata"]["namespace"], m["metadata"]["name"]): (m.get("status") or {}).get("phase")
              for m in listed}
    ours = phases.get((namespace, "obs"))
    in_api = sum(1 for phase in phases.values() if phase == "Ready")
    gauge = ready_meshes(operator)
    if (ours == "Ready" if present else ours is None) and gauge == in_api:
        return True
    raise AssertionError(f"the gauge counts {gauge:g} Ready, the API lists {in_api} ({phases})")


def test_metrics_move_with_a_mesh(operator, namespace, custom):
    assert operator.healthy()
    before = samples(operator)

    support.create_mesh(custom, namespace, "obs", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "obs")
    testing.wait_for(lambda: gauge_matches(operator, custom, namespace, present=True),
                     "procmesh_meshes{phase=Ready} to count the new mesh")
    after = samples(operator)
    assert (total(after, "procmesh_reconcile_duration_seconds_count")
            > total(before, "procmesh_reconcile_duration_seconds_count"))
    # The operator created the mesh's pod: one more successful pod create at least.
    created = {"verb": "post", "resource": "pods", "code": "201"}
    assert total(after, "procmesh_api_requests_total", **created) \
        >= total(before, "procmesh_api_requests_total", **created) + 1

    custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                           contract.PLURAL, "obs")
    testing.wait_for(lambda: gauge_matches(operator, custom, namespace, present=False),
                     "procmesh_meshes{phase=Ready} to forget the deleted mesh")
