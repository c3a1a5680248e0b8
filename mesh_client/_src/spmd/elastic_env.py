"""The per-worker environment torchrun gives, computed from a point of a proc mesh (pure).

The last mesh dimension is the local one (LOCAL_RANK, LOCAL_WORLD_SIZE); the ``hosts`` dimension,
where there is one, forms the groups (GROUP_RANK is the host, whatever other dimensions perHost
has), as torchrun's nodes do. A mesh without ``hosts`` (the local backend) counts groups of its
last dimension (GROUP_RANK = RANK // LOCAL_WORLD_SIZE), as Monarch's SPMDActor does, so no two
procs share a (GROUP_RANK, LOCAL_RANK) and the groups add up to WORLD_SIZE. A mesh of ``hosts``
alone (no perHost, or sliced to one proc per host) has one proc per machine: each is its own
group of one (LOCAL_RANK 0, LOCAL_WORLD_SIZE 1), as torchrun's ``--nproc-per-node=1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from mesh_client._src import contract


def torchelastic_env(
    coords: Mapping[str, int],
    labels: Sequence[str],
    sizes: Sequence[int],
    *,
    master_addr: str,
    master_port: int,
    run_id: str,
    restart_count: int = 0,
    max_restarts: int = 0,
) -> dict[str, str]:
    """The variables torchrun's elastic agent sets for one worker (never an agent store)."""
    if not labels:
        labels, sizes, coords = ["rank"], [1], {"rank": 0}
    rank = contract.ravel([coords[label] for label in labels], sizes)
    world = math.prod(sizes)
    local_rank = contract.local_index(labels, [coords[label] for label in labels])
    local_world = contract.local_size(labels, sizes)
    if contract.HOSTS_DIM in labels:
        groups, group_rank = dict(zip(labels, sizes))[contract.HOSTS_DIM], coords[contract.HOSTS_DIM]
    else:
        groups, group_rank = world // local_world, rank // local_world
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world),
        "WORLD_SIZE": str(world),
        "GROUP_RANK": str(group_rank),
        "GROUP_WORLD_SIZE": str(groups),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "default",
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_RESTART_COUNT": str(restart_count),
        "TORCHELASTIC_MAX_RESTARTS": str(max_restarts),
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
