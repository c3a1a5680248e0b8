"""The restart back-off of crash-looping procs, decided purely: how long a failed proc waits
before :mod:`.planning` restarts it, and what is kept of it in the status.

Pods run with ``restartPolicy: Never``, so the kubelet's CrashLoopBackOff never applies: the
operator restarts a failed proc itself, and without a back-off a proc that fails at once (a bad
import in its bootstrap, a missing file, an OOM at start) would be deleted and created again as
fast as pods can be made, ``maxRestarts`` times. So, as the kubelet does for a container, the
operator waits before each restart of a proc that keeps failing:

* the first failure in a row is restarted at once (an SPMD job that lost a rank to a NCCL error
  must not wait minutes);
* each further one waits ``Settings.restart_backoff_seconds``, doubling, up to
  ``Settings.restart_backoff_max_seconds`` (the kubelet's 10 s and 5 min);
* a proc that ran ``Settings.restart_backoff_reset_seconds`` (the kubelet's 10 min) before it
  failed starts a new row.

Only a proc whose pod ended by itself (phase Failed or Succeeded) and whose restart is counted
waits: a lost proc (its pod deleted, its node lost past its toleration) and a proc the cluster
took (a drain, a preemption) are restarted at once, as before. The failed pod is kept while it
waits, so its end (and its log) can still be read. Under RestartMesh the mesh is the unit: its
failures in a row are those of whichever procs failed, and the whole mesh waits, its other
procs stopped meanwhile (:mod:`.planning` deletes their pods when the wait starts).

What a decision needs is kept in ``status.crashLoops`` (:data:`contract.CRASH_LOOPS_STATUS_FIELD`),
one entry per proc that failed: its failed pod's uid, its failures in a row, its back-off and
when its restart is due, counted from the container's ``finishedAt``. A decision for a pod
already in it stands, so an operator that restarts (or a new leader) waits out the same
back-off; one not written yet is made again the same, from the same pod. An entry goes once its
proc's new pod has been Ready for the reset time, or with a suspend.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Iterable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import settings as settings_


@dataclasses.dataclass(frozen=True)
class CrashLoop:
    """A failed proc's place in its row of failures, and when its restart is due."""

    rank: int
    pod_uid: str  # the failed pod this decision is for
    failures: int  # failures in a row, this one included (1: restarted at once)
    back_off: float  # seconds waited from the failure (0 for the first of a row)
    restart_at: float  # epoch seconds (whole): the failure's end plus the back-off


def back_off(failures: int, settings: settings_.Settings) -> float:
    """Seconds the ``failures``-th failure in a row waits: 0, then the base, doubling to the cap."""
    if failures <= 1:
        return 0.0
    return min(settings.restart_backoff_seconds * 2.0 ** (failures - 2),
               settings.restart_backoff_max_seconds)


def _epoch(stamp: Any) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return dict(term)
    return {}


def ended_at(pod: Mapping[str, Any]) -> float | None:
    """When the proc's container ended (its ``finishedAt``), if the pod says."""
    return _epoch(_terminated(pod).get("finishedAt"))


def ran_seconds(pod: Mapping[str, Any]) -> float:
    """How long the proc's container ran before it ended; 0 when it never started (a start
    error reports a ``startedAt`` of 1970, before the pod was made) or the pod does not say
    (rejected by its node's kubelet, say): such a failure is in a row with the last."""
    term = _terminated(pod)
    started, finished = _epoch(term.get("startedAt")), _epoch(term.get("finishedAt"))
    created = _epoch((pod.get("metadata") or {}).get("creationTimestamp"))
    if started is None or finished is None or (created is not None and started < created):
        return 0.0
    return max(0.0, finished - started)


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def judge(failed: Mapping[int, Mapping[str, Any]], known: Mapping[int, CrashLoop],
          settings: settings_.Settings, now: float) -> dict[int, CrashLoop]:
    """The decision for the failed pods ``failed`` (by rank) that restart together (one proc
    under RestartProc, every failed one under RestartMesh), given the entries ``known`` that
    count toward their row (the proc's own; under RestartMesh, the whole mesh's). A decision
    already made for one of those pods stands for all of them."""
    uids = {rank: _uid(pod) for rank, pod in failed.items()}
    for loop in known.values():
        if loop.pod_uid and loop.pod_uid in uids.values():
            return {rank: dataclasses.replace(loop, rank=rank, pod_uid=uid)
                    for rank, uid in uids.items()}
    before = max((loop.failures for loop in known.values()), default=0)
    ran = max((ran_seconds(pod) for pod in failed.values()), default=0.0)
    failures = 1 if before == 0 or ran >= settings.restart_backoff_reset_seconds else before + 1
    wait = back_off(failures, settings)
    ends = [e for pod in failed.values() if (e := ended_at(pod)) is not None]
    restart_at = float(math.ceil((min(ends) if ends else now) + wait)) if wait > 0 else 0.0
    return {rank: CrashLoop(rank, uid, failures, wait, restart_at) for rank, uid in uids.items()}


def ready_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod's Ready condition last turned True, if it is True now."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return _epoch(c.get("lastTransitionTime"))
    return None


def settled(loop: CrashLoop, pod: Mapping[str, Any] | None, settings: settings_.Settings,
            now: float) -> bool:
    """Whether ``loop`` is over: its proc's new pod has been Ready for the reset time."""
    if pod is None or _uid(pod) == loop.pod_uid or (pod.get("metadata") or {}).get(
            "deletionTimestamp"):
        return False
    since = ready_since(pod)
    return since is not None and now - since >= settings.restart_backoff_reset_seconds


def _rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def read(status: Mapping[str, Any] | None) -> dict[int, CrashLoop]:
    """The entries of a written status by rank (a malformed one is left out)."""
    out: dict[int, CrashLoop] = {}
    for entry in (status or {}).get(contract.CRASH_LOOPS_STATUS_FIELD) or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("rank"), int):
            continue
        out[entry["rank"]] = CrashLoop(
            entry["rank"], str(entry.get("podUID") or ""), int(entry.get("failures") or 0),
            float(entry.get("backOffSeconds") or 0),
            _epoch(entry.get("restartTime")) or 0.0)
    return out


def render(loops: Iterable[CrashLoop]) -> list[dict[str, Any]] | None:
    """``status.crashLoops`` (None when empty: a merge patch then removes it)."""
    entries = []
    for loop in sorted(loops, key=lambda x: x.rank):
        entry: dict[str, Any] = {"rank": loop.rank, "podUID": loop.pod_uid,
                                 "failures": loop.failures,
                                 "backOffSeconds": int(math.ceil(loop.back_off))}
        if loop.restart_at > 0:
            entry["restartTime"] = _rfc3339(loop.restart_at)
        entries.append(entry)
    return entries or None


def at(epoch: float) -> str:
    """The restart time as the status and messages write it."""
    return _rfc3339(epoch)
