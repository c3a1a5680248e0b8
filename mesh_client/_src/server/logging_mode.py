"""The proc side of ``ProcMesh.logging_option``: the root logger's level, and whether the lines a
local proc prints carry its ``[<mesh> rank <r>] `` prefix.

A Monarch proc's root logger is at INFO from its start (its logging client sets it when the
mesh is spawned), and ``logging_option(level=...)`` sets it in every proc; :func:`start` and
:func:`apply` do the same here. The prefix is the local backend's form of Monarch's
``stream_to_client`` (:mod:`.output`); the owners of the procs' group decide whether to change it
(:meth:`mesh_client._src.local.launcher.LocalProcs.logging_mode`).
"""

from __future__ import annotations

import logging
import os

from mesh_client._src import contract
from mesh_client._src.server import output

#: The root logger's level in a proc until logging_option changes it (Monarch's default).
PROC_LEVEL = logging.INFO


def start() -> None:
    """At a proc's start: its root logger at :data:`PROC_LEVEL`."""
    logging.getLogger().setLevel(PROC_LEVEL)


def apply(level: int, prefixed: bool | None) -> None:
    """Run in every proc by ``logging_option``: the root logger's level, then the prefix of each
    line (``None``: leave the streams as they are, as in a pod, whose controller prefixes)."""
    logging.getLogger().setLevel(level)
    if prefixed is not None:
        mesh, rank = os.environ.get(contract.MESH, "proc"), int(os.environ.get(contract.RANK, "0"))
        output.set_prefix(output.proc_prefix(mesh, rank) if prefixed else "")
