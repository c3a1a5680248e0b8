"""Quiet logs (issue 15, item 9): the operator's log has no access line per liveness probe and no
kopf success line per pod event, and
an idle proc's log is its start line alone, though its readiness probe connected to it (Ready
needs one)."""

from __future__ import annotations

import pytest

from tests.integration.cli.support import procmesh
from tests.integration.operator.support import create_mesh, wait_ready

pytestmark = pytest.mark.cluster


def test_probes_leave_no_lines(cluster, custom, namespace, operator):
    for _ in range(3):
        assert operator.healthy()
    assert "/healthz" not in operator.log.read_text()
    create_mesh(custom, namespace, "idle", hosts=1, perHost=[{"name": "procs", "size": 2}])
    wait_ready(custom, namespace, "idle")
    assert "pod_event' succeeded" not in operator.log.read_text()  # kopf's line per pod event
    logs = procmesh(cluster.kubeconfig, "logs", "idle", "-n", namespace)
    assert logs.returncode == 0, logs.stderr
    assert sorted(line.split(" listening on ")[0] for line in logs.stdout.splitlines()) == [
        f"[rank {r}] procmesh: proc server idle[{r}]" for r in range(2)]
