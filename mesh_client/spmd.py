"""torchrun-style SPMD on proc meshes, as ``monarch.spmd``: ``from mesh_client.spmd import ...``."""

from mesh_client._src.spmd.actor import (
    SPMDActor,
    setup_torch_elastic_env,
    setup_torch_elastic_env_async,
)
from mesh_client._src.spmd.addresses import AddrType
from mesh_client._src.spmd.elastic_env import torchelastic_env
from mesh_client._src.spmd.jobs import JobRunning

__all__ = ["AddrType", "JobRunning", "SPMDActor", "setup_torch_elastic_env", "setup_torch_elastic_env_async",
           "torchelastic_env"]
