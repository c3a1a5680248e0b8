"""Opt-in departures from Monarch's behaviour, each off by default (``mesh_client.options``).

A ported Monarch program meets Monarch's semantics; these switch on what we find more useful:

- ``spawn_waits``: ``ProcMesh.spawn`` returns only after every ``__init__`` ran, and raises the
  ``ActorError`` of a failing one at the line that spawned it (Monarch: ``spawn`` returns at
  once, and a failing ``__init__`` is a supervision event).
- ``mixed_endpoints``: an actor may mix ``def`` and ``async def`` endpoints (Monarch refuses it
  at spawn; here the async ones then run on a loop of the actor's own thread).

``tree_fanout_min`` and ``tree_branching`` (:mod:`.trees`): a group of at least that many procs
gets its endpoint messages through a k-ary tree of its procs instead of one flat loop here; 0
(the default) never. On one 2-core host the flat loop is faster at every size measured (up to
512 procs, benchmarks/results/scale.md, "client"): the tree takes 2.9x less CPU from the
controller but adds 1.7-1.9x to the procs', which share its cores. Turn it on where the
controller's CPU is the limit: procs on other hosts. ``PROCMESH_TREE_FANOUT_MIN`` and
``PROCMESH_TREE_BRANCHING`` (default 16, as Monarch's ``max_cast_fanout``) set the defaults.
Both are read when an actor mesh is spawned and hold for its life (so a change cannot reorder
one sender's messages to it): set them before spawning the meshes they are for.

``prefix_logs_with_actor`` (on, as in Monarch) prefixes log records made inside an actor with
``[actor=<its display name>] ``.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class Options:
    spawn_waits: bool = False
    mixed_endpoints: bool = False
    prefix_logs_with_actor: bool = True  # as Monarch: log records made in an actor start with its name
    tree_fanout_min: int = dataclasses.field(default_factory=lambda: int(os.environ.get("PROCMESH_TREE_FANOUT_MIN", "0")))
    tree_branching: int = dataclasses.field(default_factory=lambda: int(os.environ.get("PROCMESH_TREE_BRANCHING", "16")))


options = Options()
