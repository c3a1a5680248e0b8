"""Leader election (``--leader-election``, leading.py) against the real control plane: two
operator processes on one coordination.k8s.io Lease, as two replicas of the chart's Deployment.

Aspects:
- one holds the Lease and reconciles; the other watches and acts on nothing (its log never
  names the mesh), and its metric says it does not lead;
- the holder SIGSTOPped past the Lease's duration (a replica cut off, a stalled host): the other
  takes the Lease (one more transition) and reconciles a new mesh; the old holder, resumed,
  finds the Lease gone and exits (status 3) without reconciling anything;
- the holder stopped gracefully releases the Lease: when its process is gone the Lease no longer
  names it (so a successor need not wait out a whole duration), and the other takes it over.

The session's operator (standalone, no election) is stopped for the test and started again.
"""

from __future__ import annotations

import signal
import socket
from typing import Any

import pytest
from kubernetes import client

from procmesh_operator import leading
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

LEASE = "procmesh-operator"
SECONDS = 12  # the Lease's duration: renewed every 1.6 s, given up by its holder after 8 s


def elected(folder: Any, kubeconfig: Any, namespace: str, name: str) -> support.OperatorProcess:
    op = support.OperatorProcess(kubeconfig, folder / name)
    op.folder.mkdir()
    op.start("--leader-election", LEASE, "--leader-election-namespace", namespace,
             "--leader-election-lease-seconds", str(SECONDS))
    return op


def identity(op: support.OperatorProcess) -> str:
    """The identity of a replica outside a pod (names.instance(): hostname and pid)."""
    assert op.proc is not None
    return f"{socket.gethostname()}_{op.proc.pid}"


def read_lease(kube: Any, namespace: str) -> dict[str, Any]:
    return client.ApiClient().sanitize_for_serialization(
        client.CoordinationV1Api(kube).read_namespaced_lease(LEASE, namespace))


def holder(kube: Any, namespace: str) -> str:
    return leading.holder_of(read_lease(kube, namespace))


def test_one_replica_acts_and_another_takes_over(cluster, operator, namespace, custom, core, kube,
                                                 tmp_path):
    with support.session_operator_stopped(operator):
        ops: list[support.OperatorProcess] = []
        try:
            first = elected(tmp_path, cluster.kubeconfig, namespace, "first")
            ops.append(first)
            testing.wait_for(lambda: holder(kube, namespace) == identity(first),
                             "the first replica holding the Lease")
            second = elected(tmp_path, cluster.kubeconfig, namespace, "second")
            ops.append(second)
            support.create_mesh(custom, namespace, "elect-one")
            support.wait_ready(custom, namespace, "elect-one")
            assert holder(kube, namespace) == identity(first)
            assert "elect-one" in first.log.read_text()
            assert "elect-one" not in second.log.read_text()
            assert "procmesh_operator_leader 1.0" in first.metrics()
            assert "procmesh_operator_leader 0.0" in second.metrics()
            transitions = read_lease(kube, namespace)["spec"].get("leaseTransitions", 0)

            # The holder stalls past the Lease's duration: the other takes over.
            first.proc.send_signal(signal.SIGSTOP)
            testing.wait_for(lambda: holder(kube, namespace) == identity(second),
                             "the second replica taking the Lease")
            assert read_lease(kube, namespace)["spec"]["leaseTransitions"] == transitions + 1
            support.create_mesh(custom, namespace, "elect-two")
            support.wait_ready(custom, namespace, "elect-two")
            assert "elect-two" in second.log.read_text()

            # Resumed, the old holder finds the Lease gone and exits before acting.
            seen = len(first.log.read_text())
            first.proc.send_signal(signal.SIGCONT)
            assert first.proc.wait(timeout=60) == 3
            after = first.log.read_text()[seen:]
            assert "lost the Lease" in after and "elect-two" not in after
            assert holder(kube, namespace) == identity(second)

            # A graceful stop releases the Lease; a new replica takes it without waiting.
            third = elected(tmp_path, cluster.kubeconfig, namespace, "third")
            ops.append(third)
            gone = identity(second)
            second.stop()
            assert holder(kube, namespace) != gone
            testing.wait_for(lambda: holder(kube, namespace) == identity(third),
                             "the third replica taking the released Lease")
            support.patch_mesh(custom, namespace, "elect-one", {"maxRestarts": 5})
            testing.wait_for(lambda: support.get_mesh(custom, namespace, "elect-one")["status"]
                             .get("observedGeneration") == 2, "the new holder reconciling")
        finally:
            for op in ops:
                if op.proc is not None and op.proc.poll() is None:
                    op.proc.send_signal(signal.SIGCONT)
                op.stop()
