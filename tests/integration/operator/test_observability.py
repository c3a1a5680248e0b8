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


def no_other_meshes(operator: support.OperatorProcess, custom) -> bool:
    """No ProcMesh in the cluster, and the operator's gauge counts none: the namespaces of
    earlier tests are deleted in the background, and a Ready mesh of theirs that the operator
    forgets during this test would cancel out the one it counts."""
    listed = custom.list_cluster_custom_object(contract.GROUP, contract.VERSION, contract.PLURAL)
    return not listed["items"] and total(samples(operator), "procmesh_meshes") == 0


def test_metrics_move_with_a_mesh(operator, namespace, custom):
    assert operator.healthy()
    testing.wait_for(lambda: no_other_meshes(operator, custom), "the meshes of earlier tests to be gone")
    before = samples(operator)

    support.create_mesh(custom, namespace, "obs", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "obs")
    testing.wait_for(lambda: ready_meshes(operator) == 1,
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
    testing.wait_for(lambda: ready_meshes(operator) == 0,
                     "procmesh_meshes{phase=Ready} to forget the deleted mesh")
