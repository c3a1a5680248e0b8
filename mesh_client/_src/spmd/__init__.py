"""torchrun-style SPMD on any proc mesh: the torchelastic env contract and ``SPMDActor``."""
