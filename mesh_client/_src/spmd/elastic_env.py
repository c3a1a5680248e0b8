"""The per-worker environment torchrun gives, computed from a point of a proc mesh (pure).

The last mesh dimension is the local one (LOCAL_RANK, LOCAL_WORLD_SIZE); the ``hosts`` dimension,
where there is one, forms the groups (GROUP_RANK is the host, whatever other dimensions perHost
has), as torchrun's nodes do. A mesh without ``hosts`` (the local backend) is one group.
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
    local = labels[-1]
    hosts = dict(zip(labels, sizes)).get(contract.HOSTS_DIM, 1) if local != contract.HOSTS_DIM else 1
    group_rank = coords.get(contract.HOSTS_DIM, 0) if local != contract.HOSTS_DIM else 0
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(coords[local]),
        "LOCAL_WORLD_SIZE": str(sizes[-1]),
        "WORLD_SIZE": str(world),
        "GROUP_RANK": str(group_rank),
        "GROUP_WORLD_SIZE": str(hosts),
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
