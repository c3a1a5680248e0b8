"""Prometheus metrics of the operator (served by :mod:`.__main__` with prometheus-client).

Updated by :mod:`.reconciling` (latency, phases, restarts), :mod:`.kubeclient` (requests) and
:mod:`.leading` (the Lease held).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILE_SECONDS = Histogram(
    "procmesh_reconcile_duration_seconds", "Time of one ProcMesh reconcile.",
    # Up to 5 min: a reconcile that creates a big mesh's pods on a saturated API server takes
    # longer than 10 s, and its p99 must be read, not clipped at the last bound.
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
RECONCILE_ERRORS = Counter(
    "procmesh_reconcile_errors_total", "Reconciles that failed (and were retried).")
MESHES = Gauge("procmesh_meshes", "ProcMeshes by phase.", ["phase"])
RESTARTS = Counter(
    "procmesh_restarts_total", "Restarts performed under spec.restartPolicy.", ["policy"])
LEADER = Gauge(
    "procmesh_operator_leader", "1 while this replica holds the leader election's Lease "
    "(--leader-election), else 0.")
API_REQUESTS = Counter(
    "procmesh_api_requests_total", "Requests the operator made to the API server.",
    ["verb", "resource", "code"])


def count_request(verb: str, resource: str, code: int) -> None:
    API_REQUESTS.labels(verb=verb, resource=resource, code=str(code)).inc()


def set_phases(phases: dict[str, int], known: tuple[str, ...]) -> None:
    """Publish the number of meshes per phase (every known phase, zeros included)."""
    for phase in set(known) | set(phases):
        MESHES.labels(phase=phase).set(phases.get(phase, 0))
