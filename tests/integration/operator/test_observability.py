"""Metrics and liveness of the running operator."""

import pytest

from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def test_metrics_exposed(operator, namespace, custom):
    support.create_mesh(custom, namespace, "obs", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "obs")
    text = operator.metrics()
    for name in ("procmesh_reconcile_duration_seconds_bucket", 'procmesh_meshes{phase="Ready"}',
                 "procmesh_api_requests_total", "procmesh_restarts_total"):
        assert name in text
    assert operator.healthy()
