"""The pure decision of one reconcile: which pods to delete and create, and what to report.

:mod:`.reconciling` observes (the mesh, its pods, the colocated mesh, nodes, other proc pods),
calls :func:`plan`, carries the plan out in order and hands the plan to
:func:`procmesh_operator.statuses.compute_status`. Nothing here calls the API.

Restart policy (spec.restartPolicy, counted in status.restarts, bounded by spec.maxRestarts):

* ``Never``: a failed proc stays failed; the mesh reports Degraded.
* ``RestartProc``: the failed proc's pod is deleted and recreated under the same name.
* ``RestartMesh``: every pod is deleted, and the mesh is recreated only once all are gone, so no
  proc of attempt N meets one of attempt N-1.

A proc fails when its pod finishes (phase Failed or Succeeded: the proc server exited), when
its node is lost (:mod:`.losses`) for longer than the pod tolerates (pods on a lost node are
deleted with grace period 0, ``Plan.force``, since no kubelet will confirm a graceful delete
there), or when its pod is deleted by someone else (``kubectl delete pod``, a drain's eviction,
preemption) after its proc ran: a *lost* proc. What ran is read from the status last written
(``last_phases``: each rank's ``podPhase`` in ``status.procs``): a rank that status shows
Running, Failed, Succeeded or :data:`DELETED`, whose pod is now gone or terminating, was lost,
since every pod the operator deletes itself is first recorded as Terminating there
(:func:`procmesh_operator.statuses.deleting_patch`). A pod deleted before its proc ran (Pending:
still being created or scheduled) is recreated without counting, and so is a proc whose pod the
cluster took for its own reasons (:func:`disruption`: a drain's eviction, the scheduler's
preemption): routine maintenance must not use up ``maxRestarts``, which bounds a proc's own
failures (a Job's ``podFailurePolicy`` may ignore them likewise). A lost proc kept failed (Never,
or the restarts used up) shows :data:`DELETED` as its ``podPhase``, so that it stays failed once
its pod is gone; a suspend clears that, as it clears every entry.

A failed pod that a plan counts is marked with the count (:data:`names.RESTART_COUNTED_ANNOTATION`)
before the count is written and the pod deleted: an operator that dies between that write and
the delete finds the pod, still failed, marked with a count ``status.restarts`` includes, and
deletes it without counting it again (which had used up ``maxRestarts`` for a restart made once),
nor makes it wait a back-off again. Under RestartMesh one such pod stands for its whole attempt:
a peer that failed while the operator was down is restarted with it, not counted again; and a
restart that lost procs alone made (their pods gone, none failed to mark) marks a peer it
deletes instead, or a new operator would create the lost ranks beside that attempt's peers.

A counted restart of a proc whose pod ended by itself waits out a back-off when the proc keeps
failing soon after its restarts (:mod:`.crashloops`): its failed pod is kept until then
(``Plan.backoff``), and the mesh is planned again when it ends (``Plan.recheck``). Under
RestartMesh the other procs' pods are deleted when the wait starts, uncounted (recorded
Terminating first, as every delete of the operator's): the restart replaces them anyway, and
meanwhile they would hold their devices for a gang already given up. The failed pods stay until
the restart, which marks and deletes them as a restart without a wait does, so an operator that
dies during the wait (or its deletes) finds them and neither loses the restart nor counts it twice.

Only the mesh's own pods (controlled by its uid) are its procs. A pod of a rank's name controlled
by another uid (``foreign``: an earlier mesh of this name, deleted and created again at once, whose
pods garbage collection has not removed yet) is never counted, restarted or deleted here; its
rank is created only once it is gone (the name is taken until then), and under RestartMesh
nothing is created while any is left.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import claim_budgets, crashloops, names, placing, rendering, specs
from procmesh_operator import losses as losses_
from procmesh_operator import settings as settings_


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do, and what was found, for one reconcile of one mesh."""

    creates: Mapping[int, rendering.ProcPlacement] = dataclasses.field(default_factory=dict)
    deletes: tuple[tuple[str, str], ...] = ()  # (pod name, uid): delete only that incarnation
    restarts: int = 0  # the new status.restarts
    restarted: tuple[str, ...] = ()  # pods (or the whole mesh) restarted by this plan
    failed: tuple[int, ...] = ()  # ranks whose proc failed and stays failed
    restart_limit_reached: bool = False
    refusal: placing.Refusal | None = None
    waiting: str | None = None
    force: frozenset[str] = frozenset()  # pods of ``deletes`` to delete with grace period 0
    lost: Mapping[int, str] = dataclasses.field(default_factory=dict)  # rank -> its lost node
    uncounted: Mapping[int, str] = dataclasses.field(default_factory=dict)  # rank -> why not counted
    #: Seconds until a proc on a lost node runs out of toleration, or a back-off ends.
    recheck: float | None = None
    held: tuple[str, ...] = ()  # lost nodes of ``lost`` not tainted: their procs are not counted
    foreign: tuple[str, ...] = ()  # pods of an earlier incarnation this plan waits for
    lost_procs: tuple[int, ...] = ()  # ranks whose pod was deleted under a proc that ran
    deleted: tuple[int, ...] = ()  # ranks of ``failed`` whose pod is gone (podPhase DELETED)
    # (pod name, uid, the restarts that count it): failed pods this plan counts (or a peer, for
    # a RestartMesh attempt that lost procs alone ended), to be marked
    # (names.RESTART_COUNTED_ANNOTATION) before the count is written.
    marks: tuple[tuple[str, str, int], ...] = ()
    #: Failed procs waiting out their restart back-off, by rank (their pods kept meanwhile).
    backoff: Mapping[int, crashloops.CrashLoop] = dataclasses.field(default_factory=dict)
    crash_loops: tuple[crashloops.CrashLoop, ...] = ()  # the new status.crashLoops


#: The ``podPhase`` of a proc whose pod was deleted under it and not replaced (a failed proc
#: kept failed by its restart policy).
DELETED = "Deleted"
#: The ``podPhase`` values of a proc that ran: its pod gone or terminating then is a lost proc.
RAN_PHASES = frozenset({"Running", "Failed", "Succeeded", DELETED})


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


#: The ``DisruptionTarget`` reasons of a pod the cluster took for its own reasons, not its proc's:
#: an eviction through the API (``kubectl drain``, within PodDisruptionBudgets; v1.36
#: pkg/registry/core/pod/storage/eviction.go) and the scheduler's preemption. Not the kubelet's
#: ``TerminationByKubelet``: its evictions include a pod over its own ephemeral-storage limit,
#: a proc's fault that ``maxRestarts`` must bound.
UNCOUNTED_DISRUPTIONS = frozenset({"EvictionByEvictionAPI", "PreemptionByScheduler"})


def disruption(pod: Mapping[str, Any]) -> str | None:
    """The reason of the pod's ``DisruptionTarget=True`` condition if it is one of
    :data:`UNCOUNTED_DISRUPTIONS` (its proc's restart is not counted), else None."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True" \
                and c.get("reason") in UNCOUNTED_DISRUPTIONS:
            return str(c["reason"])
    return None


def is_failed(pod: Mapping[str, Any]) -> bool:
    return not is_terminating(pod) and pod_phase(pod) in ("Failed", "Succeeded")


def is_ready(pod: Mapping[str, Any]) -> bool:
    if is_terminating(pod) or pod_phase(pod) != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def counted_as(pod: Mapping[str, Any]) -> int | None:
    """The ``status.restarts`` that an earlier reconcile counted this failed pod's failure as
    (:data:`names.RESTART_COUNTED_ANNOTATION`), or None."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(
        names.RESTART_COUNTED_ANNOTATION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _ident(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("name")), str(meta.get("uid", ""))


def plan(mesh: specs.MeshSpec, *, restarts: int,
         pods: Mapping[int, Mapping[str, Any]],
         partner: specs.MeshSpec | None = None,
         partner_pods: Mapping[int, Mapping[str, Any]] | None = None,
         nodes: Mapping[str, placing.NodeInfo] | None = None,
         other_pods: Iterable[Mapping[str, Any]] = (),
         settings: settings_.Settings,
         losses: Mapping[str, losses_.NodeLoss] | None = None, now: float = 0.0,
         foreign: Mapping[int, Mapping[str, Any]] | None = None,
         slot_memory: Mapping[tuple[str, str], int] | None = None,
         last_phases: Mapping[int, str] | None = None,
         colocation_chain: Sequence[str] = (),
         crash_loops: Mapping[int, crashloops.CrashLoop] | None = None) -> Plan:
    """Decide one reconcile of ``mesh``. ``restarts`` is the current status.restarts; ``pods``
    are the mesh's own pods by rank (terminating ones included); ``foreign`` the pods by rank
    holding a rank's name for another incarnation; ``losses`` the lost nodes by name, judged at
    ``now`` (epoch seconds); ``slot_memory`` the device memory of allocated dra slots;
    ``last_phases`` each rank's ``podPhase`` in the status last written (lost procs);
    ``colocation_chain`` the meshes followed from the partner on (:func:`placing.check_colocation`);
    ``crash_loops`` the procs' failures in a row as the status last written keeps them."""
    foreign = foreign or {}
    waits_for = tuple(sorted(_ident(p)[0] for p in foreign.values()))
    lost, expired, recheck = _node_losses(pods, losses or {}, now)
    held = tuple(sorted({n for n in lost.values() if (losses or {})[n].held}))
    force = frozenset(_ident(pods[r])[0] for r in expired)
    # Already terminating on a dead node: only a forced delete removes them (not counted again,
    # unless the taint eviction controller, not we, deleted them).
    stuck = [_ident(pods[r]) for r in sorted(expired) if is_terminating(pods[r])]
    counted = {r for r in expired
               if not is_terminating(pods[r]) or losses_.evicted_by_taint(pods[r])}

    loops = {r: loop for r, loop in (crash_loops or {}).items()
             if r < mesh.size and not crashloops.settled(loop, pods.get(r), settings, now)}
    backoff: dict[int, crashloops.CrashLoop] = {}

    def done(p: Plan) -> Plan:
        deletes = list(dict.fromkeys(p.deletes))  # a pod can be both failed and stuck
        if mesh.restart_policy != specs.NEVER or mesh.suspend:
            deletes += [d for d in stuck if d not in deletes]
        again = [t for t in [recheck, *(b.restart_at - now for b in backoff.values())]
                 if t is not None]
        return dataclasses.replace(p, deletes=tuple(deletes), force=force, lost=lost,
                                   recheck=min(again) if again else None, held=held,
                                   foreign=waits_for, backoff=dict(backoff),
                                   crash_loops=tuple(loops.values()))

    if mesh.suspend:
        loops = {}  # a resume starts every proc afresh
        return done(Plan(deletes=tuple(_ident(p) for p in pods.values() if not is_terminating(p)),
                         restarts=restarts))

    gone = lost_ranks(mesh.size, pods, foreign, last_phases or {})
    failed = sorted({rank for rank, pod in pods.items() if is_failed(pod) or rank in counted}
                    | set(gone))
    # Taken by the cluster (a drain, a preemption), not failed by their procs: restarted, not counted.
    free = {rank: why for rank in failed if rank in pods and (why := disruption(pods[rank])) is not None}
    # Counted already: the restarts written include them, by a run that died before its deletes
    # (under RestartMesh, any pod of the attempt not deleted yet: a restart that lost procs alone
    # made marks a peer).
    recounted = {rank for rank, pod in pods.items() if rank not in gone
                 and (rank in failed or mesh.restart_policy == specs.RESTART_MESH
                      and not is_terminating(pod))
                 and (n := counted_as(pod)) is not None and n <= restarts}
    marks: list[tuple[str, str, int]] = []
    deletes: list[tuple[str, str]] = []
    restarted: list[str] = []
    kept_failed: list[int] = []
    limit = False
    if failed and mesh.restart_policy == specs.NEVER:
        kept_failed = failed
    elif failed and mesh.restart_policy == specs.RESTART_PROC:
        for rank in failed:
            if rank not in free and rank not in recounted and restarts >= mesh.max_restarts:
                limit = True
                kept_failed.append(rank)
                continue
            # A proc's own failure, not counted yet: in a row with its last?
            if _crashed(rank, pods, free, gone) and rank not in recounted:
                known = {rank: loops[rank]} if rank in loops else {}
                loops[rank] = crashloops.judge({rank: pods[rank]}, known, settings, now)[rank]
                if loops[rank].restart_at > now:
                    backoff[rank] = loops[rank]
                    continue
            if rank not in free and rank not in recounted:
                restarts += 1
                if rank not in gone:
                    marks.append((*_ident(pods[rank]), restarts))
            if rank not in gone:  # (a lost proc's pod is gone or going already)
                deletes.append(_ident(pods[rank]))
            restarted.append(contract.pod_name(mesh.name, rank))
    elif (failed or recounted) and mesh.restart_policy == specs.RESTART_MESH:
        # One proc failed by itself: the restart counts, unless a pod of this attempt is marked
        # counted already (nothing is created until all are gone, so every pod left is of the
        # attempt that count restarts: a peer that failed since, its partner gone, is too).
        counts = not recounted and not set(failed) <= free.keys()
        if counts and restarts >= mesh.max_restarts:
            limit = True
            kept_failed = failed
        else:
            crashed = {r: pods[r] for r in failed if _crashed(r, pods, free, gone) and r not in recounted}
            if counts and crashed:  # the mesh's failures in a row, whichever procs failed
                loops = crashloops.judge(crashed, loops, settings, now)
                if min(loop.restart_at for loop in loops.values()) > now:
                    backoff.update(loops)
                    # The mesh is replaced whole when it ends: its procs still running stop
                    # now (deleted, not counted), as a gang's survivors would hang on their
                    # failed peer, holding devices and memory others could use meanwhile.
                    # The failed pods (which hold nothing) are kept to show why they failed.
                    stops = tuple(_ident(p) for _, p in sorted(pods.items())
                                  if not is_terminating(p) and not is_failed(p))
                    return done(Plan(deletes=stops, restarts=restarts, lost_procs=tuple(gone)))
            deletes = [_ident(p) for p in pods.values() if not is_terminating(p)]
            if counts:
                restarts += 1
                marks = [(*_ident(pods[r]), restarts) for r in failed
                         if r in pods and r not in gone and r not in free and r not in recounted]
                if not marks and deletes:  # lost procs alone: a peer it deletes marks the attempt
                    marks = [(*deletes[-1], restarts)]
            restarted.append(mesh.name)
            # Nothing is created until every pod of this attempt is gone.
            return done(Plan(deletes=tuple(deletes), restarts=restarts,
                             restarted=tuple(restarted), lost_procs=tuple(gone),
                             uncounted={} if counts else free, marks=tuple(marks)))

    deleted = tuple(r for r in kept_failed if r in gone)
    missing = [rank for rank in range(mesh.size)
               if rank not in pods and rank not in foreign and rank not in deleted]
    if mesh.restart_policy == specs.RESTART_MESH and (
            foreign or any(is_terminating(p) for p in pods.values())):
        missing = []  # a previous attempt (or incarnation) is still shutting down

    if mesh.gpus.mode == contract.GPU_MODE_DRA:  # the scheduler places; the budget is ours
        refusal = placing.check_colocation(mesh, partner, colocation_chain)
        placement = placing.Placement(refusal=refusal) if refusal is not None or not missing \
            else claim_budgets.place(mesh, missing, own_pods=pods, other_pods=other_pods,
                                     slot_memory=slot_memory or {}, settings=settings)
    else:
        placement = placing.place(
            mesh, missing, own_pods=pods, partner=partner, partner_pods=partner_pods or {},
            nodes=nodes or {}, other_pods=other_pods, settings=settings,
            colocation_chain=colocation_chain)
    return done(Plan(creates=placement.procs, deletes=tuple(deletes), restarts=restarts,
                     restarted=tuple(restarted), failed=tuple(kept_failed),
                     uncounted={r: why for r, why in free.items() if r not in kept_failed},
                     restart_limit_reached=limit, refusal=placement.refusal,
                     waiting=placement.waiting, lost_procs=tuple(gone), deleted=deleted,
                     marks=tuple(marks)))


def _crashed(rank: int, pods: Mapping[int, Mapping[str, Any]], free: Mapping[int, str],
             gone: Sequence[int]) -> bool:
    """Whether ``rank``'s failure is its proc's own, with its pod kept to show it: its pod
    ended by itself and the restart counts (not a lost proc, nor one the cluster took)."""
    return rank not in free and rank not in gone and rank in pods and is_failed(pods[rank])


def lost_ranks(size: int, pods: Mapping[int, Mapping[str, Any]],
               foreign: Mapping[int, Mapping[str, Any]],
               last_phases: Mapping[int, str]) -> list[int]:
    """Ranks whose proc ran (:data:`RAN_PHASES` in the status last written) and whose pod is
    now gone or terminating: deleted by someone else, since the operator records its own deletes
    as Terminating before making them. A name held by another incarnation is not this mesh's."""
    return [rank for rank, phase in sorted(last_phases.items())
            if rank < size and phase in RAN_PHASES and rank not in foreign
            and (rank not in pods or is_terminating(pods[rank]))]


def _node_losses(pods: Mapping[int, Mapping[str, Any]],
                 losses: Mapping[str, losses_.NodeLoss], now: float
                 ) -> tuple[dict[int, str], set[int], float | None]:
    """Ranks on lost nodes (-> node), those out of toleration, and when the next one will be."""
    lost: dict[int, str] = {}
    if not losses:
        return lost, set(), None  # no node is lost (nearly always): no pod to look at
    expired: set[int] = set()
    recheck = math.inf
    for rank, pod in pods.items():
        node = losses_.node_of(pod)
        loss = losses.get(node) if node else None
        if loss is None or node is None:
            continue
        lost[rank] = node
        left = losses_.time_left(pod, loss, now)
        if left <= 0:
            expired.add(rank)
        else:
            recheck = min(recheck, left)
    return lost, expired, None if math.isinf(recheck) else recheck
