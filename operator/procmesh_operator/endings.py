"""How a proc's pod ended, in the kubelet's words, for :mod:`.eventing` (the ``ProcFailed``
event) and :mod:`.statuses` (the ``Degraded`` message, which ``attach`` quotes).

The container's termination (exit code, signal, reason) says how the proc server ended, and
the pod's own ``reason`` and ``message`` say why when the kubelet ended it: a pod it evicted
(over its ephemeral-storage limit, or under node pressure) reads ``Evicted`` there, while its
container says only ``exit code 137, Error``, as any SIGKILL would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The kubelet's message is short; a longer one (a webhook's, say) is cut to this many characters.
MAX_POD_MESSAGE = 300


def detail(pod: Mapping[str, Any] | None) -> str | None:
    """``exit code 137, Error; pod Evicted: <the kubelet's message>``, or None when the pod's
    status says nothing of an end yet."""
    status = (pod or {}).get("status") or {}
    bits = []
    for cs in status.get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            words = [f"exit code {term.get('exitCode')}"]
            if term.get("signal"):
                words.append(f"signal {term['signal']}")
            words.append(str(term.get("reason") or "terminated"))
            bits.append(", ".join(words))
            break
    if status.get("reason"):
        message = " ".join(str(status.get("message") or "").split())
        if len(message) > MAX_POD_MESSAGE:
            message = message[:MAX_POD_MESSAGE] + " ..."
        bits.append(f"pod {status['reason']}" + (f": {message}" if message else ""))
    return "; ".join(bits) or None
