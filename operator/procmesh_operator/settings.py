"""Operator-wide settings, passed as arguments to the pure functions (never read from os.environ).

Built once by :mod:`.__main__` from the command line; :mod:`.rendering` reads the image, the
grace period, the readiness period and the node-loss toleration, :mod:`.placing` the CUDA context
size and the device memory fallback (for :mod:`.budgets` and, in dra mode,
:mod:`.claim_budgets`), :mod:`.reconciling` the resync period, the gang settings
(:mod:`.ganging`) and the status write window (:mod:`.coalescing`). The proc port is the
contract's (``mesh_client._src.contract.PROC_PORT``).
"""

from __future__ import annotations

import dataclasses

DEFAULT_IMAGE = "procmesh/proc-server:0.1.0"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the operator assumes about the cluster and the proc server image."""

    #: Image of the proc server when spec.template.image is empty.
    default_image: str = DEFAULT_IMAGE
    #: Whether the default image runs as a user other than root (ours: 10001), so that pods
    #: using it may say runAsNonRoot. False for a default image of the platform's that runs as
    #: root: the kubelet would refuse to start every proc of it.
    default_image_non_root: bool = True
    #: CUDA context (plus cuBLAS workspace) memory per process, counted in every device budget.
    cuda_context_mib: int = 768
    #: Device memory when a node has no GPU Feature Discovery label ``nvidia.com/gpu.memory``.
    default_gpu_memory_mib: int = 81920
    #: Grace period of proc pods; short, so a RestartMesh does not wait half a minute per attempt.
    termination_grace_period_seconds: int = 5
    #: Readiness probe period of the proc server's TCP port.
    readiness_period_seconds: int = 1
    #: How often every known mesh is reconciled even without events (level-based safety net).
    resync_seconds: float = 30.0
    #: How long procs on a lost node are kept, from its not-ready or unreachable NoExecute taint,
    #: before the operator force-deletes them and restarts them elsewhere per restartPolicy
    #: (Kubernetes' default toleration is 300 s). Counted by the operator, the pods tolerating
    #: the taints without end (:mod:`.losses`); a template's own tolerations for these keys win.
    node_loss_toleration_seconds: int = 30
    #: Restart back-off (procmesh_operator.crashloops): a proc that fails again soon after its
    #: restart waits this long before the next one, doubling with each failure in a row up to
    #: the max (the kubelet's CrashLoopBackOff: 10 s to 5 min); the first failure of a row is
    #: restarted at once. A proc that ran ``restart_backoff_reset_seconds`` before it failed
    #: starts a new row (the kubelet's 10 min). 0 restarts every failure at once.
    restart_backoff_seconds: float = 10.0
    restart_backoff_max_seconds: float = 300.0
    restart_backoff_reset_seconds: float = 600.0
    #: How a mesh is placed as one gang (procmesh_operator.ganging): ``auto`` (the PodGroup API
    #: where served, else the scheduling-gate fallback), ``podgroup``, ``gate`` or ``off``.
    gang: str = "auto"
    #: Gate mode: how long a released gang may stay partly bound (the rest Unschedulable)
    #: before all its pods are deleted and recreated behind the gate; the next release waits
    #: as long again, doubling per stall up to ten minutes.
    gang_stall_seconds: float = 60.0
    #: The shortest time between two status writes of one mesh that only move its progress
    #: (ready counts, proc entries; procmesh_operator.coalescing): a starting mesh's status is
    #: at most this stale in those, never in its phase or conditions. 0 writes every change.
    status_progress_seconds: float = 5.0
    #: How long a proc pod may wait with no node and no PodScheduled condition (no scheduler
    #: has looked at it) before Ready says so and names its schedulerName
    #: (procmesh_operator.statuses.unseen_by_scheduler). Long enough for a busy kube-scheduler's
    #: queue: thousands of pods at once take it a minute.
    unseen_pod_seconds: float = 120.0
    #: Pod creates in flight at once, across all meshes (earlier meshes first).
    create_concurrency: int = 32
    #: Tests only (``--test-exit-after``): end the process at once right after this step
    #: (procmesh_operator.exit_points.ALL), as a SIGKILL would.
    test_exit_after: str | None = None
