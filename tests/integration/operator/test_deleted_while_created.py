"""A ProcMesh deleted while the operator is creating its pods: the creates stop, and garbage
collection removes the pods made before, leaving none.

The reconcile in flight went on creating every pod of its plan for a mesh already gone (a
300-proc mesh deleted at its 62nd pod had 210 more made, each started by a kubelet, pulling
its image and holding its GPU, until garbage collection deleted it). The operator runs with
one create at a time, so the mesh is deleted long before its plan could be done; its pods ask
for a node that does not exist, so none of them runs.
"""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mesh_client._src import contract
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

SIZE = 150


def _count(operator: support.OperatorProcess, name: str, **labels: str) -> float:
    """The sum of the operator's samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(s.value for family in text_string_to_metric_families(operator.metrics())
               for s in family.samples if s.name == name and wanted <= set(s.labels.items()))


def test_a_mesh_deleted_while_its_pods_are_created_gets_no_more(operator, namespace, custom,
                                                                  core):
    with support.session_operator_with(operator, "--create-concurrency", "1") as op:
        support.create_mesh(custom, namespace, "doomed",
                            perHost=[{"name": "procs", "size": SIZE}],
                            template={"nodeSelector": {"procmesh.io/test-nowhere": "x"}})
        testing.wait_for(lambda: len(support.mesh_pods(core, namespace, "doomed")) >= 10,
                         "the first pods")
        custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                               contract.PLURAL, "doomed")
        # The creates have stopped once no pod was posted for 3 s (a reconcile count would not
        # tell: the operator reconciles other meshes of the session too). Without the fix they
        # went on to SIZE; a machine too slow to post one in 3 s could only hide that.
        seen = {"count": -1.0, "since": 0.0}

        def posts_settled() -> float | None:
            count = _count(op, "procmesh_api_requests_total", verb="post", resource="pods")
            now = time.monotonic()
            if count != seen["count"]:
                seen.update(count=count, since=now)
            return count if now - seen["since"] >= 3 else None

        created = testing.wait_for(posts_settled, "the pod creates stopping")
        assert 10 <= created < SIZE
        testing.wait_for(lambda: not support.mesh_pods(core, namespace, "doomed"),
                         "garbage collection of the pods made before the delete")
