"""The procs behind one root proc mesh: their addresses, the mesh token, their names and
incarnation ids (which run of each proc a connection is meant for: :mod:`mesh_client._src.wire.binding`).

A :class:`ProcGroup` pickles as plain data, so meshes sent to another proc reconnect there; the
backend that started the procs (``owner``), the bootstrap and the record of spawns (what
:mod:`.restarts` needs to reconnect and re-spawn after a proc restart) stay with the process
that owns them.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from mesh_client._src.actor.shape import Shape
from mesh_client._src.runtime import channel, peers


class ProcOwner(Protocol):
    """What a backend offers for the procs it started."""

    def stop(self, indices: Sequence[int], reason: str) -> None: ...


class RevivingOwner(ProcOwner, Protocol):
    """A backend that can bring procs back after they died (``ProcMesh.reconnect``)."""

    def revive(self, indices: Sequence[int]) -> Mapping[int, Revived]:
        """Bring back procs ``indices`` (lost, or restarted behind our back): where each serves
        now, and whether it is a new process (its actors gone). Raises when one cannot be."""
        ...

    def restart_note(self, index: int) -> str | None:
        """Why proc ``index``'s old actors are gone ("1 of at most 2 restarts used"), if known."""
        ...


@dataclasses.dataclass(frozen=True)
class Revived:
    """One proc after :meth:`ProcOwner.revive`: its address, whether it is a new process, and
    its incarnation id, learnt with the address (None: not known, any proc of the mesh answers)."""

    address: tuple[str, int]
    restarted: bool
    proc_id: str | None = None


@dataclasses.dataclass
class SpawnRecord:
    """One ``spawn`` on this group: enough to send it again to a restarted proc (``respawn``)."""

    actor_id: str
    name: str
    # The pickled (class, args, kwargs, mesh, creator), made again (the same objects, the mesh
    # with its procs' current addresses), and the text of the files of its by-value code.
    encode: Callable[[], tuple[list[bytes | memoryview], dict[str, str]]]
    what: str  # "__init__ of Class ('name')", for errors
    shape: Shape  # the actor mesh's shape: its points and the group's procs under them
    cls: type
    owner_id: str
    creator: str


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
        proc_ids: Sequence[str | None] | None = None,  # each proc's incarnation id (None: not known)
    ) -> None:
        self.name = name
        self.addresses = [(str(h), int(p)) for h, p in addresses]
        self.token = token
        self.displays = list(displays)
        # What each connection's handshake names: a proc answers only for its own id, so a stale
        # address that something else now holds cannot relay this group's handshakes elsewhere.
        self.proc_ids: list[str | None] = list(proc_ids) if proc_ids is not None else [None] * len(self.addresses)
        if len(self.proc_ids) != len(self.addresses):
            raise ValueError(f"{len(self.proc_ids)} proc ids for {len(self.addresses)} procs")
        self.owner = owner
        self.run_id = f"{name}-{uuid.uuid4().hex[:12]}"  # names one run of this group's procs
        # (run id, restart count, max restarts) for torchelastic, as the client that pickled this
        # group saw them (None: made here): an SPMD actor in a proc reads it (ProcMesh._elastic).
        self.elastic: tuple[str, int, int] | None = None
        # Procs being stopped on purpose, and when the stop began (time.monotonic()): an end of
        # theirs after it is no failure, one before it (a crash the stop came after) still is.
        self.stopping: dict[int, float] = {}
        # How often each proc was replaced by a new process that this group reconnected to
        # (:mod:`.restarts`); an actor spawned on an older incarnation is gone.
        self.incarnations = [0] * len(self.addresses)
        self.bootstrap: Callable[[], Any] | None = None  # run again in every restarted proc
        # The host mesh its procs run on, where the backend knows one (local procs: this machine's,
        # which stays true wherever the group is sent); None on Kubernetes. ``ProcMesh.host_mesh``.
        self.host: Any = None
        self.spawns: dict[str, SpawnRecord] = {}  # actor id -> its spawn, for respawn
        self.born: dict[str, list[int]] = {}  # actor id -> the incarnation of each proc at spawn
        # Restarted procs whose reconnect (connection or bootstrap) has not succeeded yet: the
        # next reconnect connects and bootstraps them again (:mod:`.restarts`).
        self.unbootstrapped: set[int] = set()
        # One reconnect or respawn at a time: two at once would both start a process in a dead
        # one's place (one left running, untracked) or wait on the other's new process.
        self.restarting = threading.RLock()
        self._opener = opener
        self.peers = [self._peer(i) for i in range(len(self.addresses))]
        for peer in self.peers:
            self._follow(peer)

    def _peer(self, index: int) -> peers.Peer:
        if self._opener is None:
            return peers.get_peer(self.addresses[index], self.token, self.displays[index], self.proc_ids[index])
        # private peers: another mesh object in this process may reach the procs directly
        return peers.Peer(self.addresses[index], self.token, self.displays[index], self._opener,
                          peers.meaning(self.proc_ids[index], self.displays[index]))

    def _follow(self, peer: peers.Peer) -> None:
        """Swap in the successor of ``peer`` when its link breaks under a live proc (:mod:`~mesh_client._src.runtime.relinking`)."""
        peer.follow(self)

    def peer_relinked(self, old: peers.Peer, new: peers.Peer) -> None:
        for index, peer in enumerate(self.peers):
            if peer is old:
                self.peers[index] = new

    def replace_peer(self, index: int, address: tuple[str, int], restarted: bool, proc_id: str | None) -> None:
        """Reach proc ``index`` at ``address``, as incarnation ``proc_id`` (learnt with the
        address), over a fresh connection (the old one is lost)."""
        old = self.peers[index]
        old.close()
        peers.forget_peer(old)
        self.addresses[index] = (str(address[0]), int(address[1]))
        self.proc_ids[index] = proc_id
        peer = self._peer(index)
        peer.explain_loss = old.explain_loss
        self._follow(peer)
        self.peers[index] = peer
        if restarted:
            self.incarnations[index] += 1

    def elastic_info(self) -> tuple[str, int, int] | None:
        """(run id, restart count, max restarts): the owner's (a backend that knows restarts),
        else what the pickling client saw, else, where this group was made (it has an owner),
        this run's id and no restarts. None in a proc sent the group by a client that did not
        say (an older one): its ``run_id`` is made at each unpickling, no rank's like another's."""
        info = getattr(self.owner, "elastic_info", None)
        if info is not None:
            return cast(tuple[str, int, int], info())
        if self.elastic is not None:
            return self.elastic
        return (self.run_id, 0, 0) if self.owner is not None else None

    def __reduce__(self) -> tuple[Any, ...]:
        # The state is a dict set as attributes: a proc server without ``elastic`` takes it too.
        return (ProcGroup, (self.name, self.addresses, self.token, self.displays, None, None, self.proc_ids),
                {"elastic": self.elastic_info(), "host": self.host})

    def __repr__(self) -> str:
        return f"<ProcGroup {self.name!r} of {len(self.addresses)} procs>"
