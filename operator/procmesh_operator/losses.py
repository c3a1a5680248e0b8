"""Node loss, decided purely: which nodes are lost, and when their procs' time is up.

A node is lost when its Ready condition is False or Unknown (the node lifecycle controller's
verdict after its grace period: no heartbeat), or when its Node object is gone. A proc on a lost
node is given the pod's own NoExecute toleration for the matching taint (``not-ready`` for False,
``unreachable`` for Unknown; :func:`procmesh_operator.rendering.node_loss_tolerations` renders a
short one) and then counts as failed: :mod:`.planning` restarts it per restartPolicy and
force-deletes its pod, because no kubelet will ever confirm a graceful delete on a dead node.

:mod:`.reconciling` keeps :class:`NodeLoss` values from the node watch; :mod:`.planning` and
:mod:`.statuses` read them. Nothing here calls the API.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping
from typing import Any

from procmesh_operator import names

GONE = "Gone"  # NodeLoss.status of a node whose object was deleted
#: Reason the taint eviction controller gives in the pod's DisruptionTarget condition.
EVICTED_BY_TAINT = "DeletionByTaintManager"


@dataclasses.dataclass(frozen=True)
class NodeLoss:
    """A lost node: its Ready status ("False", "Unknown" or GONE) and since when (epoch s)."""

    node: str
    status: str
    since: float

    @property
    def taint(self) -> str | None:
        """The NoExecute taint the node lifecycle controller puts on it (None when gone)."""
        if self.status == "False":
            return names.NOT_READY_TAINT
        if self.status == "Unknown":
            return names.UNREACHABLE_TAINT
        return None


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp()


def loss_of(node: Mapping[str, Any], now: float) -> NodeLoss | None:
    """The node's loss, or None while it is Ready (or has not reported yet)."""
    name = str((node.get("metadata") or {}).get("name"))
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            if c.get("status") == "True":
                return None
            return NodeLoss(name, str(c.get("status")), _epoch(c.get("lastTransitionTime")) or now)
    return None


def node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def toleration_seconds(pod: Mapping[str, Any], taint: str | None) -> float:
    """How long ``pod`` tolerates ``taint`` (NoExecute): the shortest matching toleration,
    ``inf`` for a toleration without tolerationSeconds, 0 when none matches or the node is gone
    (as the taint eviction controller counts it)."""
    if taint is None:
        return 0.0
    best: float | None = None
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        key, effect = t.get("key"), t.get("effect")
        if (key and key != taint) or (effect and effect != "NoExecute"):
            continue
        if not key and t.get("operator") != "Exists":
            continue
        seconds = t.get("tolerationSeconds")
        value = math.inf if seconds is None else max(0.0, float(seconds))
        best = value if best is None else min(best, value)
    return 0.0 if best is None else best


def time_left(pod: Mapping[str, Any], loss: NodeLoss, now: float) -> float:
    """Seconds until the proc in ``pod`` counts as failed (<= 0: now)."""
    return loss.since + toleration_seconds(pod, loss.taint) - now


def evicted_by_taint(pod: Mapping[str, Any]) -> bool:
    """Whether the taint eviction controller deleted this pod (not the operator)."""
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == EVICTED_BY_TAINT
               and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
