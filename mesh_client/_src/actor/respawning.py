"""How long ``respawn()`` remembers a spawn: while the program holds a handle to its actors.

A :class:`~.procs.SpawnRecord` keeps the actor class and the first spawn's arguments (and, in
them, whatever they reference: tensors, datasets), so that :mod:`.restarts` can spawn the actors
again on a restarted proc. Kept for ever, it would also bring back actor meshes whose handles the
program dropped long ago, and hold their arguments' memory. So each spawn gets one keeper object,
held by the :class:`~.actor_mesh.ActorMesh` that ``spawn`` returns and every slice of it (never
pickled): when the last of them is gone, the record goes too (``ProcGroup.born`` stays, so a
reference that came back from another process still fails at once on a restarted proc).
:mod:`.proc_mesh` calls :func:`keep_while_held` at each spawn.
"""

from __future__ import annotations

import weakref

from mesh_client._src.actor.procs import ProcGroup


class SpawnKeeper:
    """Alive while some handle of one spawn is (its only job is to be collected with them)."""

    __slots__ = ("__weakref__", "actor_id")

    def __init__(self, actor_id: str) -> None:
        self.actor_id = actor_id

    def __repr__(self) -> str:
        return f"<SpawnKeeper {self.actor_id}>"


def keep_while_held(group: ProcGroup, actor_id: str) -> SpawnKeeper:
    """A keeper for ``actor_id``'s record on ``group``: collecting it forgets the spawn."""
    keeper = SpawnKeeper(actor_id)
    weakref.finalize(keeper, _forget, weakref.ref(group), actor_id)
    return keeper


def _forget(group_ref: weakref.ref[ProcGroup], actor_id: str) -> None:
    group = group_ref()
    if group is not None:
        group.spawns.pop(actor_id, None)
