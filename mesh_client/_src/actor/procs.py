"""The procs behind one root proc mesh: their addresses, the mesh token and their names.

A :class:`ProcGroup` pickles as plain data, so meshes sent to another proc reconnect there; the
backend that started the procs (``owner``) stays with the process that owns them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from mesh_client._src.runtime import channel, peers


class ProcOwner(Protocol):
    """What a backend offers for the procs it started."""

    def stop(self, indices: Sequence[int], reason: str) -> None: ...


class ProcGroup:
    """Addresses, token and display names of a root mesh's procs, and a lazily connected peer for each."""

    def __init__(
        self,
        name: str,
        addresses: Sequence[tuple[str, int]],
        token: bytes,
        displays: Sequence[str],
        owner: ProcOwner | None = None,
        opener: channel.Opener | None = None,  # how this client reaches the procs (default: TCP); never pickled
    ) -> None:
        self.name = name
        self.addresses = [(str(h), int(p)) for h, p in addresses]
        self.token = token
        self.displays = list(displays)
        self.owner = owner
        self.run_id = f"{name}-{uuid.uuid4().hex[:12]}"  # names one run of this group's procs
        self.stopping: set[int] = set()  # procs being stopped on purpose: their loss is no failure
        if opener is None:
            self.peers = [peers.get_peer(a, token, display) for a, display in zip(self.addresses, self.displays)]
        else:  # private peers: another mesh object in this process may reach the procs directly
            self.peers = [peers.Peer(a, token, display, opener) for a, display in zip(self.addresses, self.displays)]

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProcGroup, (self.name, self.addresses, self.token, self.displays))

    def __repr__(self) -> str:
        return f"<ProcGroup {self.name!r} of {len(self.addresses)} procs>"
