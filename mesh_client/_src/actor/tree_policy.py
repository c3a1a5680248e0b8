"""When a proc group's endpoint messages go through a tree (:mod:`.trees`) rather than a flat loop.

``options.tree_fanout_min`` set to a number decides alone: groups of at least that many procs
take the tree, 0 never. Unset (``None``, the default; ``PROCMESH_TREE_FANOUT_MIN=auto``) the
rule below decides, from what benchmarks/results/scale.md measured ("Scale: the client"):

- The tree moves the controller's per-proc work onto the procs: on a 16-core host the
  controller's CPU per fan-out fell 4x at 1,024 procs, while the procs' total grew 1.7x.
- So it pays once the controller's CPU is the limit and the procs' extra hop runs elsewhere:
  from 48 procs on the 16-core host (64 in the run that started at 64), never on the 2-core VM,
  where the procs share the controller's cores.
- Fitted on the VM, the procs' CPU per proc under the tree is about 8x the controller's per
  proc under the flat loop (331 against 41 us), so on one host the tree can only win with more
  than 8 cores beside the controller's: :data:`MIN_CORES_BESIDE_PROCS` counts that one too.

The automatic rule: at least :data:`AUTO_MIN_PROCS` procs, and either some proc is not on
this host (a non-loopback address: pods, other machines, whose cores are their own) or this
host has at least :data:`MIN_CORES_BESIDE_PROCS` usable cores.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from mesh_client._src.runtime import cores

# The smallest group the automatic rule sends through a tree: the crossover measured on the
# 16-core host (48), rounded up to a size measured on both sides of it.
AUTO_MIN_PROCS = 64
# Usable cores from which a group whose procs all share this host takes the tree: the 8x ratio
# above plus the controller's own core.
MIN_CORES_BESIDE_PROCS = 10


usable_cores = cores.affinity_cores  # the affinity mask alone, as the crossover was measured


def on_this_host(host: str) -> bool:
    """Whether an address is this host's own: loopback (local procs, the process node)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def auto(addresses: Sequence[tuple[str, int]], cores: int) -> bool:
    """The automatic rule for a group at ``addresses``, with ``cores`` usable here."""
    if len(addresses) < AUTO_MIN_PROCS:
        return False
    return cores >= MIN_CORES_BESIDE_PROCS or not all(on_this_host(h) for h, _ in addresses)


def takes_tree(addresses: Sequence[tuple[str, int]], least: int | None, cores: int | None = None) -> bool:
    """Whether a group at ``addresses`` routes through a tree, given ``options.tree_fanout_min``."""
    if least is not None:
        return least > 0 and len(addresses) >= least
    return auto(addresses, usable_cores() if cores is None else cores)


def parse_minimum(text: str) -> int | None:
    """``PROCMESH_TREE_FANOUT_MIN``: ``auto`` (or empty) for the rule above, else a count (0: never)."""
    value = text.strip().lower()
    if value in ("", "auto"):
        return None
    try:
        least = int(value)
    except ValueError:
        least = -1
    if least < 0:
        raise ValueError(
            f"PROCMESH_TREE_FANOUT_MIN={text!r}: give 'auto' (the default: a tree from {AUTO_MIN_PROCS} procs "
            f"on other hosts or on a host of {MIN_CORES_BESIDE_PROCS}+ cores), 0 (never) or a number of procs"
        )
    return least
