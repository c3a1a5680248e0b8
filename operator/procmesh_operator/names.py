"""What only the operator names: the token mount inside a proc pod, the labels and selector of a
mesh's children, the node-loss taints it tolerates and the cordon's taint, the node label that
means "one node", and the name of this operator replica.

Every name the client must agree on (API coordinates, child names, label and annotation keys,
the token key, the port) is in :mod:`mesh_client._src.contract`; this module builds on it.
Used by :mod:`.rendering` (pods, Service, Secret, Role).
"""

from __future__ import annotations

import os
import socket

from mesh_client._src import contract

# Taints the node lifecycle controller puts on a lost node (well_known_taints.go), NoExecute.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"  # node Ready=False
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"  # node Ready=Unknown (no heartbeat)
NODE_LOSS_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)
#: The taint a cordoned node (spec.unschedulable) is judged by, NoSchedule (:mod:`.fitting`).
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
#: On a proc pod: ``taint=seconds,...``, the node-loss tolerations the operator rendered (without
#: end, so that the taint eviction controller never evicts by them) and the seconds after which
#: the operator itself counts the proc failed (:mod:`.losses`).
NODE_LOSS_ANNOTATION = "procmesh.io/node-loss-toleration-seconds"
#: On a failed proc pod about to be deleted: the ``status.restarts`` that counts its failure,
#: put there before that count is written (:mod:`.planning`; under RestartMesh, on a peer when
#: only lost procs, their pods gone, made the restart). A pod still there, so marked,
#: when the operator starts again was counted already by a run that died before its delete.
RESTART_COUNTED_ANNOTATION = "procmesh.io/restart-counted"

#: The well-known node label (well_known_labels.go) that inter-pod affinity reads as "same node".
HOSTNAME_LABEL = "kubernetes.io/hostname"

#: The User-Agent of every request of the operator (:mod:`.kubeclient`), of every release: the
#: API server names the field manager of a write without one after it (``managedFields``), so
#: :mod:`.workloads` can tell that an operator set a Workload's ``spec.active`` last. Keep it.
FIELD_MANAGER = "procmesh-operator"

# Where the token Secret is mounted in the proc server container (PROCMESH_TOKEN_FILE).
TOKEN_VOLUME = "procmesh-token"
TOKEN_DIR = "/var/run/procmesh"
TOKEN_PATH = f"{TOKEN_DIR}/{contract.TOKEN_KEY}"


def mesh_labels(mesh: str) -> dict[str, str]:
    """Labels every child of ``mesh`` carries; also the Service's selector."""
    return {contract.MESH_LABEL: mesh, contract.MANAGED_BY_LABEL: contract.MANAGED_BY}


def mesh_selector(mesh: str) -> dict[str, str]:
    """The selector matching the pods of ``mesh`` (the Service selector)."""
    return {contract.MESH_LABEL: mesh}


def instance() -> str:
    """This operator replica's name: its pod's (``POD_ID``, which the chart sets from the pod
    name), else the host's with the process id. The holder of the leader election's Lease
    (:mod:`.leading`) and the ``reportingInstance`` of its Events (:mod:`.eventing`)."""
    return os.environ.get("POD_ID") or f"{socket.gethostname()}_{os.getpid()}"
