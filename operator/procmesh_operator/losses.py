"""Node loss, decided purely: which nodes are lost, and when their procs' time is up.

A node is lost when its Ready condition is False or Unknown (the node lifecycle controller's
verdict after its grace period: no heartbeat), or when its Node object is gone. A proc on a lost
node is given the pod's own NoExecute toleration for the node's taint (``not-ready`` for False,
``unreachable`` for Unknown; :func:`procmesh_operator.rendering.node_loss_tolerations` renders a
short one), counted from the taint's ``timeAdded`` as the taint eviction controller counts it,
and then counts as failed: :mod:`.planning` restarts it per restartPolicy and force-deletes its
pod, because no kubelet will ever confirm a graceful delete on a dead node.

The clock is the taint, not the Ready condition: the node lifecycle controller holds its taints
back where losing the node is unlikely to be the node's fault, in a small zone that is mostly
lost (v1.36 ``ReducedQPSFunc``) and when every node of the cluster is lost at once (its "master
disruption mode", as after a control-plane outage or a partition from it: it lifts the taints,
``handleDisruption``). A proc on a lost but untainted node is held: reported, never counted as
failed. The operator also applies the second rule itself (:func:`outage`, :func:`judged`): v1.36
can leave one node tainted on entering that mode (its tainting worker races the lifting), and
the operator renders its own tolerations without end (:func:`rendering.node_loss_tolerations`)
so that such a taint evicts nothing either. When the outage ends no clock starts earlier, as the
controller gives each node its grace anew then.

:mod:`.reconciling` keeps :class:`NodeLoss` values from the node watch; :mod:`.planning` and
:mod:`.statuses` read them. Nothing here calls the API.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping
from typing import Any

from procmesh_operator import names, tolerations

GONE = "Gone"  # NodeLoss.status of a node whose object was deleted
#: Reason the taint eviction controller gives in the pod's DisruptionTarget condition.
EVICTED_BY_TAINT = "DeletionByTaintManager"


@dataclasses.dataclass(frozen=True)
class NodeLoss:
    """A lost node: its Ready status ("False", "Unknown" or GONE), its NoExecute node-loss taint
    and when that was added (epoch s; for a gone node, when it went). No taint on a node still
    there: the node lifecycle controller holds evictions (see above)."""

    node: str
    status: str
    since: float | None
    taint: str | None = None

    @property
    def held(self) -> bool:
        """Lost, but not tainted: its procs wait and are not counted as failed."""
        return self.status != GONE and self.since is None


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp()


def gone(name: str, now: float) -> NodeLoss:
    """The loss of a deleted node: its procs count at once."""
    return NodeLoss(name, GONE, now, None)


def loss_of(node: Mapping[str, Any], now: float) -> NodeLoss | None:
    """The node's loss, or None while it is Ready (or has not reported yet)."""
    name = str((node.get("metadata") or {}).get("name"))
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            if c.get("status") == "True":
                return None
            taint, since = _loss_taint(node, now)
            return NodeLoss(name, str(c.get("status")), since, taint)
    return None


def _loss_taint(node: Mapping[str, Any], now: float) -> tuple[str | None, float | None]:
    """The node's NoExecute node-loss taint and its timeAdded (now, if it has none)."""
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") in names.NODE_LOSS_TAINTS and t.get("effect") == "NoExecute":
            return str(t["key"]), _epoch(t.get("timeAdded")) or now
    return None, None


def carried(before: NodeLoss | None, after: NodeLoss | None) -> NodeLoss | None:
    """``after``, keeping ``before``'s clock while the node stays lost and tainted: the node
    lifecycle controller swaps not-ready for unreachable (a new ``timeAdded``) when a NotReady
    node stops reporting, and the taint eviction controller keeps a pod's first scheduled
    eviction across that swap."""
    if (before is None or after is None or before.since is None or after.since is None
            or GONE in (before.status, after.status)):
        return after
    return dataclasses.replace(after, since=min(before.since, after.since))


def is_ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def outage(lost: Mapping[str, NodeLoss], ready: int) -> bool:
    """Every node is lost at once (``ready`` nodes are Ready): the node lifecycle controller's
    master disruption mode, a control-plane outage rather than node loss."""
    return ready == 0 and any(loss.status != GONE for loss in lost.values())


def judged(lost: Mapping[str, NodeLoss], *, during_outage: bool,
           resumed: float | None) -> dict[str, NodeLoss]:
    """The losses as :mod:`.planning` counts them: during an outage every node still there is
    held; after one (ended at ``resumed``), no clock starts before it ended."""
    out: dict[str, NodeLoss] = {}
    for name, loss in lost.items():
        if loss.status != GONE and during_outage:
            loss = dataclasses.replace(loss, since=None)
        elif loss.status != GONE and loss.since is not None and resumed is not None:
            loss = dataclasses.replace(loss, since=max(loss.since, resumed))
        out[name] = loss
    return out


def without_empty_gone(lost: Mapping[str, NodeLoss], in_use: set[str]) -> dict[str, NodeLoss]:
    """``lost`` less the deleted nodes no pod of ours is bound to any more: nothing will ever
    look them up again (their pods were replaced), and in a cluster whose nodes come and go
    (an autoscaler) they would pile up, each scanned at every outage check and every plan."""
    return {name: loss for name, loss in lost.items() if loss.status != GONE or name in in_use}


def node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def toleration_seconds(pod: Mapping[str, Any], taint: str | None) -> float:
    """How long ``pod`` tolerates ``taint`` (NoExecute): the operator's seconds where it rendered
    the toleration (:data:`names.NODE_LOSS_ANNOTATION`), else the shortest matching toleration
    (as the taint eviction controller counts it), ``inf`` for one without tolerationSeconds, 0
    when none matches or there is no taint."""
    if taint is None:
        return 0.0
    counted = _counted(pod)
    if taint in counted:
        return counted[taint]
    best: float | None = None
    lost = node_loss_taint(taint)
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if not tolerations.tolerates(t, lost):
            continue
        seconds = t.get("tolerationSeconds")
        value = math.inf if seconds is None else max(0.0, float(seconds))
        best = value if best is None else min(best, value)
    return 0.0 if best is None else best


def node_loss_taint(key: str) -> dict[str, str]:
    """The taint the node lifecycle controller puts on a lost node (no value, NoExecute)."""
    return {"key": key, "effect": "NoExecute"}


def _counted(pod: Mapping[str, Any]) -> dict[str, float]:
    """The pod's :data:`names.NODE_LOSS_ANNOTATION`, read (a malformed entry is left out)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(names.NODE_LOSS_ANNOTATION)
    out: dict[str, float] = {}
    for entry in str(value or "").split(","):
        key, _, seconds = entry.partition("=")
        try:
            out[key.strip()] = max(0.0, float(seconds))
        except ValueError:
            continue
    return out


def time_left(pod: Mapping[str, Any], loss: NodeLoss, now: float) -> float:
    """Seconds until the proc in ``pod`` counts as failed (<= 0: now; ``inf``: held)."""
    if loss.since is None:
        return math.inf
    if loss.status == GONE:
        return loss.since - now
    return loss.since + toleration_seconds(pod, loss.taint) - now


def evicted_by_taint(pod: Mapping[str, Any]) -> bool:
    """Whether the taint eviction controller deleted this pod (not the operator)."""
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == EVICTED_BY_TAINT
               and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
