"""When a changed ProcMesh status is written: at once if what it says changed, else at most once
per window per mesh.

A mesh that starts is reconciled after nearly every batch of its pods' events, and each batch
moves a count (``readyProcs``, "12 of 64 procs on nodes") or a proc's entry (its node, address,
phase). Writing each of those was ~10 status patches per 64-proc mesh at 6,400 pods, a tenth of
the operator's requests. :func:`significant` splits a change in two:

* what the status *says*: ``phase``, ``observedGeneration``, ``desiredProcs``, ``restarts``, any
  other field (Kueue's), and each condition's ``status``, ``reason`` and ``observedGeneration``;
  any change at all while the mesh is (or was) Ready, since a client connects from that table.
  Written at once, so every phase and condition change is recorded, in order;
* progress: ``readyProcs``, ``procs``/``procTable`` and the conditions' messages of a mesh that is
  not Ready. :class:`StatusThrottle` lets one such write per mesh through per window and defers
  the rest: the reconcile asks to run again when the window ends and writes what it computes
  then (level-based: the latest state, never a queued old one).

Pure but for the clock; used by :mod:`.reconciling` around :func:`statuses.differs`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from mesh_client._src import contract

#: Status fields that only count or list progress toward the spec.
PROGRESS_FIELDS = frozenset({"readyProcs", "procs", "procTable"})
#: Condition fields that name a state (the message and transition time follow from it or only
#: describe it).
CONDITION_STATE = ("status", "reason", "observedGeneration")


def _states(conditions: Any) -> dict[str, tuple[Any, ...]]:
    return {str(c.get("type")): tuple(c.get(k) for k in CONDITION_STATE)
            for c in conditions or () if isinstance(c, Mapping)}


def _ready(status: Mapping[str, Any]) -> bool:
    return bool(_states(status.get("conditions")).get(contract.READY, (None,))[0] == "True")


def significant(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether going from ``old`` to ``new`` changes what the status says (see the module
    docstring), rather than only its progress. Call it on statuses that differ. Only the fields
    of ``new`` count: the write is a merge patch of ``new``, so a field only ``old`` has (one that
    another step records, such as ``renderedHostPlacement``) stays as it is."""
    if not old or _ready(old) or _ready(new):
        return True
    for key in new:
        if key in PROGRESS_FIELDS:
            continue
        if key == "conditions":
            if _states(old.get(key)) != _states(new.get(key)):
                return True
        elif old.get(key) != new.get(key):
            return True
    return False


class StatusThrottle:
    """Per mesh, when its last status write went out; decides whether a progress-only change
    is written now or deferred to the end of the window."""

    def __init__(self, window_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:  # clock: for tests
        self.window = window_seconds
        self._clock = clock
        self._written: dict[Hashable, float] = {}

    def wait(self, key: Hashable, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> float:
        """Seconds to defer writing ``new`` over ``old`` (0: write now)."""
        if self.window <= 0 or significant(old, new):
            return 0.0
        last = self._written.get(key)
        if last is None:
            return 0.0
        return max(0.0, last + self.window - self._clock())

    def wrote(self, key: Hashable) -> None:
        """A status write of ``key`` went out now."""
        self._written[key] = self._clock()

    def forget(self, key: Hashable) -> None:
        """The mesh is gone."""
        self._written.pop(key, None)

    def __len__(self) -> int:
        return len(self._written)
