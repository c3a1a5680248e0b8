"""Ending the default process group an SPMD script leaves behind, as its process's exit would.

Under torchrun every run of a script is a process of its own, and its process group ends with
it. ``SPMDActor.main`` runs the script in a proc that lives on, so a group the script did not
destroy outlived it: running a script on the same mesh again failed in ``init_process_group``
("trying to initialize the default process group twice"), and when the script raised, its
peers waited in their collectives with it for the group's timeout (30 minutes), their actors
answering nothing meanwhile. :func:`end` destroys the group; :class:`~.actor.SPMDActor` calls it
once the script's result is sent (so a failure is reported before its peers see the group go).
Gloo peers' collectives then fail at once; NCCL peers are not told by their communicator and
wait out the group's timeout as before.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any


def _distributed() -> Any:
    """``torch.distributed`` if a script imported it (never imported here: torch is heavy)."""
    return sys.modules.get("torch.distributed")


def initialized() -> bool:
    """Whether this proc has a default process group."""
    dist = _distributed()
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def end() -> None:
    """Destroy this proc's default process group, if there is one. Never raises: it runs after
    the script's result was sent, where an exception would fail the actor; a failure is
    printed to the proc's log."""
    try:
        if initialized():
            _distributed().destroy_process_group()
    except Exception:
        print("procmesh: ending the process group an SPMD script left failed:", file=sys.stderr)
        traceback.print_exc()
