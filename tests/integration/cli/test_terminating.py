"""A mesh being deleted but held by a finalizer: the CLI says it is Terminating and what holds it.

Its deletion counts as a new generation that no operator reconciles, so before, ``get`` showed
``StatusStale``, ``describe`` and ``wait`` asked whether the operator was running, and
``delete --wait`` sent the user to a ``describe`` that did not mention the deletion.

Aspects: get's PHASE; describe's Terminating line (since when, finalizers left) and warning;
wait failing at once naming the finalizer; delete --wait and wait --for delete at their timeout
naming it.
"""

from __future__ import annotations

import pytest

from mesh_client._src import contract
from tests.cluster import testing
from tests.integration.cli.support import procmesh
from tests.integration.operator.support import create_mesh, get_mesh, wait_ready

pytestmark = pytest.mark.cluster

HOLD = "example.com/hold"


def test_a_mesh_held_by_a_finalizer_is_shown_terminating(cluster, custom, namespace, operator):
    create_mesh(custom, namespace, "held", hosts=1, perHost=[{"name": "procs", "size": 1}])
    wait_ready(custom, namespace, "held")
    custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "held",
                                          {"metadata": {"finalizers": [HOLD]}})
    kc = cluster.kubeconfig
    try:
        deleted = procmesh(kc, "delete", "held", "-n", namespace, "--wait", "--timeout", "2s")
        assert deleted.returncode == 1
        assert deleted.stdout == 'procmesh.procmesh.io "held" deleted\n'
        assert f"ProcMesh {namespace}/held still exists after 2 s: it is being deleted (since " in deleted.stderr
        assert f"waits for its finalizers ({HOLD}: the controller that set it removes it)" in deleted.stderr
        testing.wait_for(lambda: get_mesh(custom, namespace, "held")["metadata"].get("deletionTimestamp"),
                         "the deletion recorded")

        row = procmesh(kc, "get", "held", "-n", namespace).stdout.splitlines()[1].split()
        assert row[:3] == ["held", "1/1", "Terminating"]
        described = procmesh(kc, "describe", "held", "-n", namespace).stdout
        assert "Phase:          Terminating" in described
        terminating = next(line for line in described.splitlines() if line.startswith("Terminating:"))
        assert terminating.endswith(f" ago); finalizers left: {HOLD}"), terminating
        assert "Warning:        Terminating: it is being deleted" in described
        assert "is the operator running" not in described

        waited = procmesh(kc, "wait", "held", "-n", namespace, "--timeout", "10m")
        assert waited.returncode == 1
        assert f"ProcMesh {namespace}/held cannot become Ready: it is being deleted" in waited.stderr
        assert HOLD in waited.stderr and "is the operator running" not in waited.stderr

        gone = procmesh(kc, "wait", "held", "-n", namespace, "--for", "delete", "--timeout", "1s")
        assert gone.returncode == 1 and f"waits for its finalizers ({HOLD}:" in gone.stderr
    finally:
        custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL,
                                              "held", {"metadata": {"finalizers": None}})
