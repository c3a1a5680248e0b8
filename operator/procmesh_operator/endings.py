"""How a proc's pod ended, for :mod:`.eventing` (the ``ProcFailed`` event) and :mod:`.statuses`
(the ``Degraded`` message, which ``attach`` quotes), in the words the client uses too
(:func:`mesh_client._src.contract.pod_verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_client._src import contract


def detail(pod: Mapping[str, Any] | None) -> str | None:
    """``exit code 137, Error; pod Evicted: <the kubelet's message>``, or None when the pod's
    status says nothing of an end yet."""
    status = (pod or {}).get("status") or {}
    bits = [contract.pod_termination(term) for cs in status.get("containerStatuses") or []
            if (term := (cs.get("state") or {}).get("terminated"))][:1]
    said = contract.pod_verdict(pod or {})
    if said:
        bits.append(said)
    return "; ".join(bits) or None
