"""Mesh leases (``spec.lease``): a mesh lives while its holder renews it.

The holder (the Python client that created the mesh) writes the annotation
``procmesh.io/lease-renew-time``; the value is the holder's clock, so it is compared with
nothing. What counts is when *this* operator saw it change, on its own monotonic clock: no clock
skew between machines can expire a lease early, and after an operator restart every lease gets a
full duration again (late rather than wrong). :class:`LeaseClock` keeps that per mesh;
:mod:`.reconciling` asks it how long a mesh has left and deletes the mesh when nothing is left.
Nothing here calls the API.
"""

from __future__ import annotations

import dataclasses

Key = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class Sighting:
    """The mesh incarnation ``uid`` showed renewal ``value`` first at ``seen`` (monotonic s)."""

    uid: str
    value: str | None
    seen: float


class LeaseClock:
    """When each leased mesh's renewal was last seen to change."""

    def __init__(self) -> None:
        self._sightings: dict[Key, Sighting] = {}

    def remaining(self, key: Key, uid: str, value: str | None, duration: int, now: float) -> float:
        """Seconds until the lease of ``key`` lapses (<= 0: it has), given its renewal ``value``
        seen at ``now``. A new value (or a new incarnation of the mesh) restarts the count."""
        last = self._sightings.get(key)
        if last is None or last.uid != uid or last.value != value:
            last = Sighting(uid, value, now)
            self._sightings[key] = last
        return last.seen + duration - now

    def forget(self, key: Key) -> None:
        self._sightings.pop(key, None)

    def __len__(self) -> int:
        return len(self._sightings)
