"""After a proc restart: reconnect to the new procs, re-spawn the actors that died with the old.

A proc that dies takes its actors with it; the backend may bring a new process up in its place
(Kubernetes: the operator, per ``restartPolicy``; locally: :func:`reconnect` itself, since the
local backend restarts nothing on its own). The client's handles still address the old one.
:func:`reconnect` asks the group's owner (the backend, :class:`~.procs.RevivingOwner`) where
each proc serves now, opens fresh connections (runs the mesh's bootstrap again in restarted
procs) and counts each restarted proc's incarnation in its :class:`~.procs.ProcGroup`.
:func:`respawn` also sends every spawn recorded on the group again, with the same actor id,
class and arguments, to the procs that restarted since, so the handles the program holds work
again (the actors start from their ``__init__``: their state is lost).

An actor handle whose proc restarted after its spawn fails its calls at once with the words of
:func:`gone_message` (:mod:`.actor_mesh` compares ``ProcGroup.born`` with its incarnations),
never by reaching a proc that does not know it. :mod:`.proc_mesh` offers both as
``ProcMesh.reconnect`` and ``ProcMesh.respawn``.
"""

from __future__ import annotations

import functools
from typing import Any

from mesh_client._src.actor import messages, sources, watching
from mesh_client._src.actor.procs import ProcGroup, RevivingOwner
from mesh_client._src.runtime import futures, ops

#: What a program does after a restart, said in every error about one.
WAY_ON = ("re-spawn your actors: mesh.respawn() reconnects and spawns them again (same class and "
          "arguments, fresh state), or call mesh.reconnect() and spawn them yourself")


def _owner(group: ProcGroup) -> RevivingOwner:
    owner = group.owner
    if owner is None:
        raise RuntimeError(
            f"{group!r} cannot be reconnected here: this is a reference received from another process; "
            f"only the program that spawned or attached the mesh can reconnect or respawn it")
    if not hasattr(owner, "revive"):
        raise RuntimeError(
            f"{group!r} cannot be reconnected: its backend ({type(owner).__name__}, e.g. procs spawned on "
            f"attach_to_workers hosts) cannot bring procs back; spawn_procs again for new procs")
    return owner  # type: ignore[return-value]  # checked by hasattr: a RevivingOwner


def note(group: ProcGroup, index: int) -> str:
    """"1 of at most 2 restarts used" or what the owner knows of proc ``index``'s restarts."""
    owner = group.owner
    told = owner.restart_note(index) if owner is not None and hasattr(owner, "restart_note") else None
    return told or f"restart {group.incarnations[index]} seen by this client"


def gone_message(group: ProcGroup, index: int, actor: str) -> str:
    """Why an actor of ``group``'s proc ``index`` spawned before its latest restart is gone."""
    return (f"proc {group.displays[index]} was restarted ({note(group, index)}) after actor mesh "
            f"{actor!r} was spawned on it, so that actor is gone; {WAY_ON}")


def reconnect(group: ProcGroup) -> list[int]:
    """Reach every proc of ``group`` that was lost or restarted; the restarted ones' indices.

    Blocks until the backend has them back (Kubernetes: the mesh Ready again with a new pod for
    each lost proc; locally: a new process started for each dead one), runs the mesh's
    bootstrap in each restarted proc, and raises with the backend's reason otherwise. A lost
    proc that is still alive (only its connection broke) is reached again where it is: its
    actors are still there, so their supervision watches start again and nothing is
    bootstrapped (the client mostly does that by itself when the link breaks, runtime/relinking.py:
    this is for a proc it could not tell alive then). Procs that were stopped on purpose are left alone. A restarted proc stays in
    ``group.unbootstrapped`` until its connection and bootstrap succeeded, so the next call
    after one that raised connects and bootstraps it again (and returns it again).
    """
    owner = _owner(group)
    with group.restarting:
        return _reconnect(group, owner)


def _reconnect(group: ProcGroup, owner: RevivingOwner) -> list[int]:
    wanted = [i for i in range(len(group.peers)) if i not in group.stopping]
    revived = owner.revive(wanted)
    for index, proc in sorted(revived.items()):
        group.replace_peer(index, proc.address, proc.restarted, proc.proc_id)
        if proc.restarted:
            group.unbootstrapped.add(index)
    restarted = sorted(group.unbootstrapped.intersection(wanted))  # this time's, and a failed call's
    for index in sorted(set(revived) | set(restarted)):
        group.peers[index].connect()
    if group.bootstrap is not None and restarted:
        payload, texts = sources.dumps_with_sources(group.bootstrap)
        waits = [group.peers[i].request((ops.BOOTSTRAP, sources.not_yet_sent(group.peers[i], texts)), payload, functools.partial(
            messages.decode_reply, "bootstrap after a restart", group.displays[i])) for i in restarted]
        for fut in waits:
            fut.get()
    group.unbootstrapped.difference_update(restarted)
    _watch_again(group, [i for i, proc in revived.items() if not proc.restarted])
    return restarted


def _watch_again(group: ProcGroup, procs: list[int]) -> None:
    """Watch again the actors of ``procs`` (reached again, not restarted): their watches failed
    with the old connection, and their actors are still running."""
    if not procs:
        return
    for record in list(group.spawns.values()):
        born, shape = group.born[record.actor_id], record.shape
        ranks = [pt.rank for pt in shape.points()
                 if shape.ranks[pt.rank] in procs and born[shape.ranks[pt.rank]] == group.incarnations[shape.ranks[pt.rank]]]
        if ranks:
            watching.watch(group, shape, record.actor_id, record.name, record.cls, record.owner_id, record.creator,
                           only=ranks)


def respawn(group: ProcGroup) -> list[int]:
    """:func:`reconnect`, then every recorded spawn again on the procs restarted since it.

    The same actor ids, so existing handles reach the new actors; each ``__init__`` runs again
    with the arguments of the first spawn (the same objects, pickled again: the mesh they get
    has its procs' new addresses); the first that raises is raised here.
    """
    with group.restarting:
        return _respawn(group)


def _respawn(group: ProcGroup) -> list[int]:
    restarted = reconnect(group)
    sent: list[futures.Future[Any]] = []
    for record in list(group.spawns.values()):
        born, shape = group.born[record.actor_id], record.shape
        points = [pt for pt in shape.points() if born[shape.ranks[pt.rank]] != group.incarnations[shape.ranks[pt.rank]]]
        if not points:
            continue
        payload, texts = record.encode()
        for pt in points:
            p = shape.ranks[pt.rank]
            sent.append(group.peers[p].request(
                (ops.SPAWN, record.actor_id, record.name, pt.rank, shape.labels, shape.sizes,
                 sources.not_yet_sent(group.peers[p], texts)),
                payload,
                functools.partial(messages.decode_reply, record.what, group.displays[p])))
            born[p] = group.incarnations[p]
        watching.watch(group, shape, record.actor_id, record.name, record.cls, record.owner_id, record.creator,
                       only=[pt.rank for pt in points])
    for fut in sent:
        fut.get()
    return restarted
