"""Opt-in departures from Monarch's behaviour, each off by default (``mesh_client.options``).

A ported Monarch program meets Monarch's semantics; these switch on what we find more useful:

- ``spawn_waits``: ``ProcMesh.spawn`` returns only after every ``__init__`` ran, and raises the
  ``ActorError`` of a failing one at the line that spawned it (Monarch: ``spawn`` returns at
  once, and a failing ``__init__`` is a supervision event).
- ``mixed_endpoints``: an actor may mix ``def`` and ``async def`` endpoints (Monarch refuses it
  at spawn; here the async ones then run on a loop of the actor's own thread).

``tree_fanout_min`` and ``tree_branching`` (:mod:`.trees`): a group of at least that many procs
gets its endpoint messages through a k-ary tree of its procs instead of one flat loop here; 0
never. ``None`` (the default, ``PROCMESH_TREE_FANOUT_MIN=auto``) lets :mod:`.tree_policy` decide
from the measured crossover: a tree from 64 procs when they are on other hosts (pods) or this
host has 10 or more cores, else flat (on a 2-core host the flat loop is faster at every size).
``PROCMESH_TREE_FANOUT_MIN`` and ``PROCMESH_TREE_BRANCHING`` (default 16, as Monarch's
``max_cast_fanout``) set the defaults.
Both are read when an actor mesh is spawned and hold for its life (so a change cannot reorder
one sender's messages to it): set them before spawning the meshes they are for.

``prefix_logs_with_actor`` (on, as in Monarch) prefixes log records made inside an actor with
``[actor=<its display name>] ``.
"""

from __future__ import annotations

import dataclasses
import os

from mesh_client._src.actor import tree_policy


@dataclasses.dataclass
class Options:
    spawn_waits: bool = False
    mixed_endpoints: bool = False
    prefix_logs_with_actor: bool = True  # as Monarch: log records made in an actor start with its name
    tree_fanout_min: int | None = dataclasses.field(
        default_factory=lambda: tree_policy.parse_minimum(os.environ.get("PROCMESH_TREE_FANOUT_MIN", "auto"))
    )
    tree_branching: int = dataclasses.field(default_factory=lambda: int(os.environ.get("PROCMESH_TREE_BRANCHING", "16")))


options = Options()


class MonarchConfig:
    """``monarch.actor.config``: Monarch's module of switches, here an object over :data:`options`
    (``config.prefix_python_logs_with_actor = False`` is ``options.prefix_logs_with_actor = False``)."""

    __slots__ = ()

    @property
    def prefix_python_logs_with_actor(self) -> bool:
        return options.prefix_logs_with_actor

    @prefix_python_logs_with_actor.setter
    def prefix_python_logs_with_actor(self, value: bool) -> None:
        options.prefix_logs_with_actor = bool(value)


config = MonarchConfig()
