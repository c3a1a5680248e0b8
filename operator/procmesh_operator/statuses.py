"""ProcMesh status: condition types, their reasons, and the pure ``compute_status``.

Conditions follow the Kubernetes format (type, status, observedGeneration, lastTransitionTime,
reason, message) and are always all present. ``phase`` is a display summary derived from them
for ``kubectl get``; nothing reads it back. :mod:`.reconciling` calls :func:`compute_status`
with the :class:`~procmesh_operator.planning.Plan` it carried out and writes the result through
the status subresource only when :func:`differs` says so.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import (
    claims,
    crashloops,
    create_refusals,
    endings,
    ganging,
    placing,
    planning,
    proc_entries,
    specs,
)

# Condition types, and the reasons a client acts on (the refusals, ProcFailed and
# RestartLimitReached), are the contract's (mesh_client._src.contract); one function below
# computes each condition.

# --- Reasons only the operator sets ------------------------------------------------------------
ALL_PROCS_READY = "AllProcsReady"  # Ready=True, Progressing=False
PROCS_NOT_READY = "ProcsNotReady"  # Ready=False while procs start
NODE_LOST = contract.NODE_LOST  # Ready=False: procs are on a NotReady/unreachable/deleted node
CREATING_PROCS = "CreatingProcs"  # Progressing=True
RESTARTING = "Restarting"  # Progressing=True after a restart by policy
#: Progressing=True: pods of an earlier mesh of this name (another uid) still hold rank names.
WAITING_FOR_PREVIOUS_PODS = "WaitingForPreviousPods"
SUSPENDED = "Suspended"  # spec.suspend: pods removed, resource kept
RECONCILE_ERROR = contract.RECONCILE_ERROR  # Degraded=True: an API call failed; retried with backoff
NO_FAILURES = "NoFailures"  # Degraded=False
NO_GPUS = "NoGPUs"  # budget True: gpus.mode none
DEVICE_PLUGIN_ASSIGNS = "DevicePluginAssigns"  # budget True: plugin mode, per-proc fraction
WITHIN_BUDGET = "WithinBudget"  # budget True: pinned devices (or dra claim slots) checked
# Refusals (placing.py): InvalidColocation, DeviceNotFound, GPUBudgetExceeded, NoNodeFits; dra
# mode (reconciling.py): DRANotServed; and the waits (contract.WAITING_REASONS):
# WaitingForGPUBudget, WaitingForNode, WaitingForColocatedMesh. Ready=False,
# ResourceClaimUnallocatable (the scheduler's message, read from a proc pod):
# contract.CLAIM_UNALLOCATABLE; ResourceClaimDeleted (a pod waits for a claim being deleted
# under running procs): contract.CLAIM_DELETED.
BUDGET_REFUSALS = (contract.DEVICE_NOT_FOUND, contract.BUDGET_EXCEEDED, contract.NO_NODE_FITS,
                   contract.WAITING_FOR_GPU_BUDGET, contract.WAITING_FOR_NODE,
                   contract.DRA_NOT_SERVED)

# --- Phases (display only) ---------------------------------------------------------------------
PHASE_READY = "Ready"
PHASE_PROGRESSING = "Progressing"
PHASE_DEGRADED = "Degraded"
PHASE_FAILED = "Failed"  # only what no wait fixes: a failure beyond policy, a refusal that stays
#: A refusal that clears by itself (room frees, a node joins, the colocated mesh is created or
#: scheduled): Progressing is True with one of contract.WAITING_REASONS.
PHASE_WAITING = "Waiting"
PHASE_SUSPENDED = "Suspended"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` in a status's list, or None (which means Unknown)."""
    for c in conditions or []:
        if c.get("type") == type_:
            return c
    return None


def _condition(previous: Sequence[Mapping[str, Any]] | None, type_: str, status: str, reason: str,
               message: str, generation: int, now: str) -> dict[str, Any]:
    old = condition(previous, type_)
    since = now
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        since = str(old["lastTransitionTime"])
    return {"type": type_, "status": status, "observedGeneration": generation,
            "lastTransitionTime": since, "reason": reason, "message": message}


@dataclasses.dataclass(frozen=True)
class Observed:
    """What the conditions are computed from: one reconcile's outcome."""

    mesh: specs.MeshSpec
    pods: Mapping[int, Mapping[str, Any]]
    plan: planning.Plan | None  # None when the reconcile failed before planning
    error: str | None
    ready: int
    desired: int
    restarts: int
    #: The token Secret the pods mount, found gone while the mesh has procs
    #: (:mod:`.secret_probes`); None: there, or not asked.
    missing_secret: str | None = None
    #: When (epoch seconds), and after how long a pod no scheduler looked at is reported
    #: (None: not judged).
    now: float = 0.0
    unseen_after: float | None = None
    #: The API server's refusal of a proc pod at create (:mod:`.create_refusals`).
    create_refusal: create_refusals.CreateRefusal | None = None
    #: dra mode: the claims the mesh's pods use, by name (:class:`.claiming.ClaimView`).
    claims_seen: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def unseen(self) -> tuple[str, str] | None:
        """:func:`unseen_by_scheduler`, judged once every rank has its pod (a gang scheduler
        holds back an incomplete gang without marking it); computed only if a verdict asks."""
        if self.unseen_after is None or len(self.pods) < self.mesh.size:
            return None
        return unseen_by_scheduler(self.pods, self.now, self.unseen_after)

    @property
    def refusal(self) -> placing.Refusal | None:
        return self.plan.refusal if self.plan is not None else None

    @property
    def blocked(self) -> placing.Refusal | create_refusals.CreateRefusal | None:
        """Why procs have no pod: the placement's refusal, else the API server's."""
        return self.refusal or self.create_refusal


#: A condition's (status, reason, message); the type and timestamps are added by compute_status.
Verdict = tuple[str, str, str]


def ready_verdict(o: Observed) -> Verdict:
    """Ready, the summary: every desired proc's pod is Ready."""
    if o.mesh.suspend:
        return "False", SUSPENDED, "spec.suspend is true: the mesh has no pods"
    if o.ready == o.desired:
        return "True", ALL_PROCS_READY, f"{o.ready} of {o.desired} procs ready"
    if o.blocked is not None:
        return "False", o.blocked.reason, o.blocked.message
    if o.missing_secret is not None:
        return ("False", contract.TOKEN_SECRET_MISSING,
                f"{o.ready} of {o.desired} procs ready; {missing_secret_message(o.mesh, o.missing_secret)}")
    if o.plan is not None and o.plan.lost:
        return "False", NODE_LOST, node_lost_message(o.mesh, o.plan)
    if o.plan is not None and (o.plan.restart_limit_reached or o.plan.failed):
        # Degraded's reason: the one a user of kubectl get pm (its REASON column) must see.
        reason = contract.RESTART_LIMIT_REACHED if o.plan.restart_limit_reached else contract.PROC_FAILED
        return ("False", reason, f"{o.ready} of {o.desired} procs ready; "
                f"{failed_procs(o.mesh, o.plan, o.pods)} failed for good (Degraded says what to do)")
    if o.plan is not None and o.plan.backoff:
        return ("False", contract.CRASH_LOOP_BACK_OFF,
                f"{o.ready} of {o.desired} procs ready; {backoff_message(o)}")
    for rank in sorted(o.pods):
        unallocatable = claims.unschedulable_claim_message(o.pods[rank])
        if unallocatable is not None:
            return ("False", contract.CLAIM_UNALLOCATABLE,
                    f"pod {contract.pod_name(o.mesh.name, rank)}: the scheduler cannot allocate "
                    f"its ResourceClaim: {unallocatable}")
    deleted_claim = claim_deleted(o) if o.claims_seen else None
    if deleted_claim is not None:
        return "False", contract.CLAIM_DELETED, deleted_claim
    stuck = stuck_container(o.pods) or unschedulable(o.pods) or o.unseen
    if stuck is not None:
        return "False", stuck[0], f"{o.ready} of {o.desired} procs ready; {stuck[1]}"
    return "False", PROCS_NOT_READY, f"{o.ready} of {o.desired} procs ready"


def claim_deleted(o: Observed) -> str | None:
    """Ready's message when a proc's pod waits for a dra claim being deleted under running
    procs (:func:`.claims.deleted_claim_message`), else None."""
    going = {str((p.get("metadata") or {}).get("name")) for p in o.pods.values()
             if (p.get("metadata") or {}).get("deletionTimestamp")}
    owner = claims.claims_owner(o.mesh)
    for rank in sorted(o.pods):
        deleted = claims.deleted_claim_message(
            o.pods[rank], o.claims_seen.get(claims.slot_of(o.mesh, rank)[0]), going,
            None if owner == o.mesh.name else owner)
        if deleted is not None:
            return (f"{o.ready} of {o.desired} procs ready; pod "
                    f"{contract.pod_name(o.mesh.name, rank)} cannot be scheduled: {deleted}")
    return None


#: The PodScheduled=False reasons of a Pending pod (:func:`unschedulable`).
POD_PENDING_REASONS = ("Unschedulable", "SchedulingGated")


def unschedulable(pods: Mapping[int, Mapping[str, Any]]) -> tuple[str, str] | None:
    """The scheduler's reason and message for Pending procs (PodScheduled=False), naming the
    lowest rank and counting the others, or None: so ``describe`` and ``attach`` show why in
    Ready, not only in the pods' own conditions."""
    pending: list[tuple[int, Mapping[str, Any]]] = []
    for rank in sorted(pods):
        for c in (pods[rank].get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                pending.append((rank, c))
    if not pending:
        return None
    rank, c = pending[0]
    name = (pods[rank].get("metadata") or {}).get("name", "?")
    more = f" (and {len(pending) - 1} more pods)" if len(pending) > 1 else ""
    reason = str(c.get("reason") or "Unschedulable")
    return reason, f"pod {name} ({rank=}) is Pending: {c.get('message') or reason}{more}"


#: Ready's reason for procs whose pods no scheduler has looked at for long
#: (``Settings.unseen_pod_seconds``).
NOT_SEEN_BY_SCHEDULER = "NotSeenByScheduler"


@functools.lru_cache(maxsize=4096)  # pods of a mesh share creation seconds; parsed per reconcile
def epoch(rfc3339: str) -> float:
    """Seconds since the epoch of an API timestamp (``2026-01-01T00:00:00Z``)."""
    return datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _unseen_age(pod: Mapping[str, Any], now: float) -> float | None:
    """How long ``pod`` has waited with no node and no PodScheduled condition (no scheduler has
    looked at it), or None when one has, or it is going."""
    if (pod.get("spec") or {}).get("nodeName"):  # most pods: bound
        return None
    if any(c.get("type") == "PodScheduled"
           for c in (pod.get("status") or {}).get("conditions") or []):
        return None
    meta = pod.get("metadata") or {}
    created = meta.get("creationTimestamp")
    if not created or meta.get("deletionTimestamp"):
        return None
    try:
        return now - epoch(str(created))
    except ValueError:  # not the API server's format: no age to judge
        return None


def unseen_by_scheduler(pods: Mapping[int, Mapping[str, Any]], now: float, after: float
                        ) -> tuple[str, str] | None:
    """Ready's reason and message when procs' pods have waited ``after`` seconds with no
    scheduler looking at them (the template names a scheduler that does not run, or the
    cluster's is down): otherwise they are Pending with no reason anywhere. A scheduler marks
    a pod it cannot place in its first cycle, and binds one it can, so only a pod no scheduler
    has taken off its queue stays unmarked."""
    unseen = [rank for rank in sorted(pods)
              if (_unseen_age(pods[rank], now) or 0.0) >= after]
    if not unseen:
        return None
    pod = pods[unseen[0]]
    name = (pod.get("metadata") or {}).get("name", "?")
    scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
    more = f" (and {len(unseen) - 1} more pods)" if len(unseen) > 1 else ""
    return NOT_SEEN_BY_SCHEDULER, (
        f"pod {name} (rank={unseen[0]}){more} has waited over {after:.0f} s and no "
        f"scheduler has looked at it (it has no PodScheduled condition): is a scheduler named "
        f"{scheduler!r} running? spec.template.schedulerName names it (left out: "
        f"default-scheduler, the kube-scheduler)")


def unseen_recheck(pods: Mapping[int, Mapping[str, Any]], now: float, after: float
                   ) -> float | None:
    """Seconds until the next pod has waited ``after`` unseen (the reconcile then looks
    again: nothing else would change for it), or None."""
    ages = [age for age in (_unseen_age(p, now) for p in pods.values())
            if age is not None and age < after]
    return after - max(ages) if ages else None


def stuck_container(pods: Mapping[int, Mapping[str, Any]]) -> tuple[str, str] | None:
    """The kubelet's reason and message for the lowest-ranked proc whose container cannot start
    without a change (a missing image, say), or None."""
    for rank in sorted(pods):
        pod = pods[rank]
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in contract.STUCK_WAITING_REASONS:
                name = (pod.get("metadata") or {}).get("name", "?")
                detail = f": {waiting['message']}" if waiting.get("message") else ""
                return str(waiting["reason"]), f"pod {name} ({rank=}): {waiting['reason']}{detail}"
    return None


def degraded_verdict(o: Observed) -> Verdict | None:
    """Degraded: a proc failed beyond its policy, or the reconcile failed. None: unknown this
    time (no plan), so the previous condition stands."""
    if o.error is not None:
        return "True", RECONCILE_ERROR, o.error
    if o.create_refusal is not None and not o.create_refusal.waits:
        return "True", o.create_refusal.reason, o.create_refusal.message
    if o.plan is None:
        return None
    if o.plan.restart_limit_reached:
        each = ("one restart restarts the whole mesh" if
                o.mesh.restart_policy == specs.RESTART_MESH else
                "one restart each; later failures use more")
        return ("True", contract.RESTART_LIMIT_REACHED,
                f"{failed_procs(o.mesh, o.plan, o.pods)} failed and spec.maxRestarts "
                f"({o.mesh.max_restarts}) restarts are used up; raise maxRestarts to restart "
                f"them ({each}), or suspend and resume the mesh to start every proc again "
                f"(status.restarts stays: a later failure is not restarted either)")
    if o.plan.failed:
        return ("True", contract.PROC_FAILED,
                f"{failed_procs(o.mesh, o.plan, o.pods)} failed and restartPolicy is Never: set "
                f"spec.restartPolicy to RestartProc or RestartMesh to restart them (counted "
                f"against spec.maxRestarts), or suspend and resume the mesh to start every proc "
                f"again")
    if o.missing_secret is not None:
        return "True", contract.TOKEN_SECRET_MISSING, missing_secret_message(o.mesh,
                                                                              o.missing_secret)
    return "False", NO_FAILURES, "no proc has failed beyond its policy"


def missing_secret_message(mesh: specs.MeshSpec, secret: str) -> str:
    """What a missing token Secret means and what to do: an operator-made Secret comes back,
    with a new token, once the mesh has no pods (:mod:`.token_secrets`); the creator's own
    (``spec.tokenSecretName``) only from its creator."""
    gone = (f"the token Secret {secret} was deleted while the mesh has procs: a proc started "
            f"from now on (a restart, a replaced pod) cannot start, its token volume missing")
    if mesh.token_secret_name is not None:
        return (f"{gone}. It is spec.tokenSecretName, which the operator never creates: create "
                f"it again with the token the running procs hold, or delete and recreate the "
                f"mesh")
    return (f"{gone}, and the operator gives running procs no new token. Suspend the mesh and "
            f"resume it (kubectl patch procmesh {mesh.name} --type merge -p "
            f"'{{\"spec\":{{\"suspend\":true}}}}', then false): once its pods are gone the "
            f"operator creates {secret} again with a new token and starts every proc on it "
            f"(attached clients attach again); or delete and recreate the mesh")


#: How many failed procs' ends :func:`failed_procs` tells (a mesh-wide crash would repeat one).
TOLD_ENDINGS = 3


def failed_procs(mesh: specs.MeshSpec, plan: planning.Plan,
                 pods: Mapping[int, Mapping[str, Any]]) -> str:
    """``procs 1 (its pod m-1 was deleted), 3 (exit code 137, OOMKilled)``: the failed ranks,
    with the cause of the first few, so the condition (and ``attach``, which quotes it) says
    why without a look at the pods or the Events."""
    lost = set(plan.lost_procs)
    ranks, told = [], 0
    for r in plan.failed:
        why = (f"its pod {contract.pod_name(mesh.name, r)} was deleted" if r in lost
               else endings.detail(pods.get(r)) if told < TOLD_ENDINGS else None)
        told += r not in lost and why is not None
        ranks.append(f"{r} ({why})" if why else str(r))
    return ("proc " if len(ranks) == 1 else "procs ") + ", ".join(ranks)


def backoff_message(o: Observed) -> str:
    """Which procs wait out their restart back-off, how their pods ended, and until when:
    ``proc 1 (exit code 1, Error) failed 3 times in a row: the operator restarts it at
    2026-12-07T12:00:30Z, after a back-off of 20 s (...)``; under RestartMesh, that the mesh's
    other procs are stopped until then."""
    assert o.plan is not None
    by_time: dict[float, list[crashloops.CrashLoop]] = {}
    for rank in sorted(o.plan.backoff):
        loop = o.plan.backoff[rank]
        by_time.setdefault(loop.restart_at, []).append(loop)
    whole = o.mesh.restart_policy == specs.RESTART_MESH
    parts, told = [], 0
    for restart_at, loops in sorted(by_time.items()):
        procs = []
        for loop in loops:
            why = endings.detail(o.pods.get(loop.rank)) if told < TOLD_ENDINGS else None
            told += why is not None
            procs.append(f"{loop.rank} ({why})" if why else str(loop.rank))
        first = loops[0]
        parts.append(
            f"{'proc' if len(procs) == 1 else 'procs'} {', '.join(procs)} failed "
            f"{first.failures} times in a row: the operator restarts "
            f"{'the whole mesh' if whole else 'it' if len(procs) == 1 else 'them'} at "
            f"{crashloops.at(restart_at)}, after a back-off of {math.ceil(first.back_off)} s")
    # Under RestartMesh the others are stopped while it waits (planning.plan deletes them).
    others = o.mesh.size - len(o.plan.backoff) if whole else 0
    if others > 0:
        parts[-1] += (f"; the mesh's other {others} {'proc is' if others == 1 else 'procs are'} "
                      f"stopped until then (deleted, not counted as failed)")
    return (f"{'; '.join(parts)} (restartPolicy {o.mesh.restart_policy}, {o.restarts} of at "
            f"most {o.mesh.max_restarts} restarts used; the back-off doubles with each failure "
            f"in a row, the failed pod kept meanwhile)")


def progressing_verdict(o: Observed, degraded: Mapping[str, Any]) -> Verdict:
    """Progressing: the operator still works toward the spec, also while it waits for what
    clears by itself (:attr:`placing.Refusal.waits`); False once complete or stuck (a refusal
    that stays, or a failure that ``degraded`` reports and no reconcile can fix)."""
    if o.mesh.suspend:
        return "False", SUSPENDED, "suspended"
    if o.blocked is not None:
        return "True" if o.blocked.waits else "False", o.blocked.reason, o.blocked.message
    if degraded["status"] == "True" and degraded["reason"] != RECONCILE_ERROR:
        return "False", degraded["reason"], degraded["message"]
    if o.plan is not None and o.plan.backoff:
        return "True", contract.CRASH_LOOP_BACK_OFF, backoff_message(o)
    if o.ready == o.desired and o.error is None:
        return "False", ALL_PROCS_READY, "the mesh is complete"
    if o.plan is not None and o.plan.waiting is not None:
        return "True", contract.WAITING_FOR_COLOCATED, o.plan.waiting
    if o.plan is not None and o.plan.foreign:
        return ("True", WAITING_FOR_PREVIOUS_PODS,
                f"pods {', '.join(o.plan.foreign)} belong to an earlier ProcMesh of this name (another "
                f"uid); their ranks are created once garbage collection has removed them")
    if o.plan is not None and (o.plan.restarted or any(planning.is_terminating(p)
                                                       for p in o.pods.values())):
        return "True", RESTARTING, f"{o.restarts} of at most {o.mesh.max_restarts} restarts used"
    return ("True", CREATING_PROCS,
            f"{len(o.pods)} of {o.desired} pods exist, {o.ready} ready")


def budget_verdict(o: Observed) -> Verdict:
    """GPUBudgetSatisfied: the placement check of the mesh's devices."""
    if o.refusal is not None and o.refusal.reason in BUDGET_REFUSALS:
        return "False", o.refusal.reason, o.refusal.message
    if o.refusal is not None:
        return "Unknown", o.refusal.reason, "not checked: " + o.refusal.reason
    if o.plan is not None and o.plan.waiting is not None:
        return "Unknown", contract.WAITING_FOR_COLOCATED, o.plan.waiting
    if o.mesh.gpus.mode == contract.GPU_MODE_NONE:
        return "True", NO_GPUS, "gpus.mode is none"
    if o.mesh.gpus.mode == contract.GPU_MODE_PLUGIN:
        return ("True", DEVICE_PLUGIN_ASSIGNS,
                f"each proc requests one {o.mesh.gpus.resource_name}; the device plugin "
                f"picks the device")
    if o.mesh.gpus.mode == contract.GPU_MODE_DRA:
        return ("True", WITHIN_BUDGET,
                "every claimed device fits the memory fractions and CUDA contexts of the procs "
                "that share its claim; the kube-scheduler allocates the devices")
    return ("True", WITHIN_BUDGET,
            "every pinned device fits its procs' memory fractions and CUDA contexts")


def scheduled_verdict(o: Observed, hold: ganging.Hold | None) -> Verdict:
    """Scheduled: every proc's pod is on a node; else why the gang waits (``hold``, from
    :mod:`.ganging`), else the first unbound pod's PodScheduled reason."""
    if o.mesh.suspend:
        return "False", SUSPENDED, "spec.suspend is true: the mesh has no pods"
    size = o.mesh.size  # once: it is computed from the shape (and big meshes have many pods)
    live = {r: p for r, p in o.pods.items() if r < size and not planning.is_terminating(p)}
    bound = sum(1 for p in live.values() if ganging.is_bound(p))
    if bound == size:
        return "True", ganging.ALL_PROCS_SCHEDULED, f"{bound} of {size} procs on nodes"
    if hold is not None:
        return "False", hold.reason, hold.message
    for rank in sorted(live):
        for c in (live[rank].get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" \
                    and c.get("reason") != "SchedulingGated":
                name = (live[rank].get("metadata") or {}).get("name", "?")
                return ("False", str(c.get("reason") or ganging.UNSCHEDULABLE),
                        f"{bound} of {o.mesh.size} procs on nodes; pod {name} is Pending: "
                        f"{c.get('message', '')}")
    if o.unseen is not None:
        return "False", o.unseen[0], f"{bound} of {o.mesh.size} procs on nodes; {o.unseen[1]}"
    # The operator placed no pod for the rest: the refusal (or the wait) is why, not the
    # scheduler, which has nothing to schedule ("Scheduling" there read as a wait it was not).
    if o.blocked is not None:
        return ("False", o.blocked.reason,
                f"{bound} of {o.mesh.size} procs on nodes; no pod is created for the others: "
                f"{o.blocked.message}")
    if o.plan is not None and o.plan.waiting is not None:
        return ("False", contract.WAITING_FOR_COLOCATED,
                f"{bound} of {o.mesh.size} procs on nodes; {o.plan.waiting}")
    return "False", ganging.SCHEDULING, f"{bound} of {o.mesh.size} procs on nodes"


def compute_status(mesh: specs.MeshSpec, previous: Mapping[str, Any] | None,
                   pods: Mapping[int, Mapping[str, Any]], plan: planning.Plan | None,
                   error: str | None = None, *, now: str | None = None,
                   claimed_gpus: Mapping[int, str] | None = None,
                   hold: ganging.Hold | None = None,
                   memo: proc_entries.EntryMemo | None = None,
                   missing_secret: str | None = None,
                   unseen_after: float | None = None,
                   create_refusal: create_refusals.CreateRefusal | None = None,
                   claims_seen: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The status of ``mesh`` given its pods (by rank, as observed after the plan ran), the plan
    (None when the reconcile failed before planning), the error of the reconcile, if any, and
    what holds its gang (:mod:`.ganging`), if anything.
    ``claimed_gpus``: dra mode, the allocated device of each rank (:mod:`.claims`).
    ``memo``: the mesh's entries as last computed (:mod:`.proc_entries`; the same result).
    ``missing_secret``: the token Secret, found gone under running procs (:mod:`.secret_probes`);
    ``create_refusal``: the API server refused a proc pod (:mod:`.create_refusals`);
    ``claims_seen``: dra mode, the claims the mesh's pods use, by name (:mod:`.claiming`)."""
    now = now or now_rfc3339()
    previous = previous or {}
    prev_conditions = previous.get("conditions")
    entries: list[dict[str, Any]] = []
    if not mesh.suspend:
        # Without a plan (the reconcile failed before it), the kept failures stand as written.
        deleted = frozenset(plan.deleted) if plan is not None else frozenset(
            r for r, phase in proc_entries.last_phases(previous).items()
            if phase == planning.DELETED)
        entries = memo.entries(mesh, pods, claimed_gpus, deleted) if memo is not None \
            else proc_entries.entries(mesh, pods, claimed_gpus, deleted)
    o = Observed(
        mesh=mesh, pods=pods, plan=plan, error=error,
        ready=sum(1 for entry in entries if entry["ready"]),
        desired=0 if mesh.suspend else mesh.size,
        restarts=plan.restarts if plan is not None else int(previous.get("restarts") or 0),
        missing_secret=None if mesh.suspend else missing_secret,
        now=epoch(now), unseen_after=unseen_after, create_refusal=create_refusal,
        claims_seen=claims_seen or {})

    def cond(type_: str, verdict: Verdict) -> dict[str, Any]:
        return _condition(prev_conditions, type_, *verdict, mesh.generation, now)

    degraded = degraded_verdict(o)
    old_degraded = condition(prev_conditions, contract.DEGRADED)
    if degraded is not None:
        degraded_c = cond(contract.DEGRADED, degraded)
    elif old_degraded is not None:
        degraded_c = dict(old_degraded)
    else:
        degraded_c = cond(contract.DEGRADED, ("Unknown", RECONCILE_ERROR, ""))
    scheduled = scheduled_verdict(o, hold)
    ready = ready_verdict(o)
    # The gang's wait is why it is not ready: it says more than one Pending pod's reason
    # (unschedulable(): "SchedulingGated" behind our gate, or the scheduler's "Unschedulable").
    if ready[1] in (PROCS_NOT_READY, *POD_PENDING_REASONS) and scheduled[0] == "False" and scheduled[1] in (
            ganging.UNSCHEDULABLE, ganging.WAITING_FOR_GANG, ganging.GANG_STALLED):
        ready = ("False", scheduled[1], scheduled[2])
    conditions = [cond(contract.READY, ready),
                  cond(contract.PROGRESSING, progressing_verdict(o, degraded_c)),
                  degraded_c,
                  cond(contract.GPU_BUDGET, budget_verdict(o)),
                  cond(contract.SCHEDULED, scheduled)]
    return {
        "observedGeneration": mesh.generation,
        "phase": derive_phase(mesh.suspend, conditions),
        "desiredProcs": o.desired,
        "readyProcs": o.ready,
        "restarts": o.restarts,
        "conditions": conditions,
        **procs_fields(mesh, entries),
        contract.CRASH_LOOPS_STATUS_FIELD: crashloops.render(plan.crash_loops)
        if plan is not None else previous.get(contract.CRASH_LOOPS_STATUS_FIELD),
        # Recorded by token_secrets.py before this status; kept, so that it never reads as a
        # change (coalescing.significant compares every field).
        **({contract.TOKEN_SECRET_STATUS_FIELD: mesh.recorded_token_secret_name}
           if mesh.recorded_token_secret_name else {}),
    }


def _marked(pods: Mapping[int, Mapping[str, Any]], deleting: Sequence[tuple[str, str]]
            ) -> dict[int, Mapping[str, Any]]:
    """``pods`` with those of ``deleting`` (name, uid) as terminating."""
    doomed = set(deleting)
    marked: dict[int, Mapping[str, Any]] = {}
    for rank, pod in pods.items():
        meta = pod.get("metadata") or {}
        if (str(meta.get("name")), str(meta.get("uid", ""))) in doomed:
            pod = {**pod, "metadata": {**meta, "deletionTimestamp":
                                       meta.get("deletionTimestamp") or now_rfc3339()}}
        marked[rank] = pod
    return marked


def before_deletes(mesh: specs.MeshSpec, previous: Mapping[str, Any] | None,
                   pods: Mapping[int, Mapping[str, Any]], plan: planning.Plan, *,
                   claimed_gpus: Mapping[int, str] | None = None) -> dict[str, Any]:
    """The status to write *before* carrying out ``plan``'s deletes: as :func:`compute_status`
    with those pods already terminating (the restart counted, Ready False, their entries
    Terminating), keeping conditions of other types (Kueue's Admitted). Written first, so that
    an operator that dies between the deletes and its status write neither loses the restart
    nor, on its next start, takes its own deletes for lost procs (:func:`planning.lost_ranks`)."""
    status = compute_status(mesh, previous, _marked(pods, plan.deletes), plan,
                            claimed_gpus=claimed_gpus)
    types = {c["type"] for c in status["conditions"]}
    status["conditions"] += [dict(c) for c in (previous or {}).get("conditions") or []
                             if c.get("type") not in types]
    return status


def deleting_patch(mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]],
                   deleting: Sequence[tuple[str, str]], *,
                   deleted: frozenset[int] = frozenset()) -> dict[str, Any]:
    """The procs' entries to write before the operator deletes the pods ``deleting`` (name,
    uid) outside a plan (a stalled gang, never Ready): those pods as Terminating (``deleted``:
    ranks kept failed with their pod gone), so that their deletes are not taken for lost
    procs (:func:`planning.lost_ranks`)."""
    entries = proc_entries.entries(mesh, _marked(pods, deleting), None, deleted)
    return {"readyProcs": sum(1 for e in entries if e["ready"]), **procs_fields(mesh, entries)}


def procs_fields(mesh: specs.MeshSpec, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``status.procs``, or for a mesh too big to list, an empty list and ``status.procTable``
    (:func:`contract.encode_proc_table`; None while suspended, which a merge patch deletes)."""
    if contract.lists_procs(mesh.size):
        return {"procs": entries}
    return {"procs": [], "procTable": contract.encode_proc_table(entries) if entries else None}


def node_lost_message(mesh: specs.MeshSpec, plan: planning.Plan) -> str:
    by_node: dict[str, list[int]] = {}
    for rank, node in sorted(plan.lost.items()):
        by_node.setdefault(node, []).append(rank)
    where = "; ".join(f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))} "
                      f"on node {node}" for node, ranks in sorted(by_node.items()))
    message = (f"{where}: the node is NotReady, unreachable or gone; its procs are restarted per "
               f"restartPolicy ({mesh.restart_policy}) once their node-loss toleration is up")
    if plan.held:
        message += (f"; held on {', '.join(plan.held)}: every node is lost at once (a "
                    f"control-plane outage, not node loss), or the node lifecycle controller "
                    f"has not tainted it (most of a small zone is lost), so its procs wait and "
                    f"nothing is counted until that ends")
    return message


def derive_phase(suspended: bool, conditions: Sequence[Mapping[str, Any]]) -> str:
    """A one-word summary for ``kubectl get`` (display only; never read back): Waiting while
    Progressing's reason is a wait (:data:`contract.WAITING_REASONS`)."""
    if suspended:
        return PHASE_SUSPENDED
    ready = condition(conditions, contract.READY) or {}
    progressing = condition(conditions, contract.PROGRESSING) or {}
    degraded = condition(conditions, contract.DEGRADED) or {}
    if ready.get("status") == "True":
        return PHASE_READY
    if progressing.get("status") == "False":
        return PHASE_FAILED
    if degraded.get("status") == "True":
        return PHASE_DEGRADED
    if progressing.get("reason") in contract.WAITING_REASONS:
        return PHASE_WAITING
    return PHASE_PROGRESSING


def differs(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change anything (transition times are kept by
    :func:`compute_status` when a condition's status holds, so plain equality suffices)."""
    if not old:
        return True
    return any(old.get(k) != v for k, v in new.items())
