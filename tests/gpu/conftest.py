"""GPU tests run only where CUDA is; everywhere else they skip with the reason."""

import shutil
import subprocess

import pytest

try:
    import torch

    CUDA_DEVICES = torch.cuda.device_count() if torch.cuda.is_available() else 0
except ImportError:  # torch is an extra
    CUDA_DEVICES = 0


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/") and CUDA_DEVICES == 0:
            item.add_marker(pytest.mark.skip(reason="needs CUDA: no CUDA device on this machine"))


@pytest.fixture(scope="session")
def device_ids():
    """GPUs 0 and 1 where there are two, else GPU 0 (the policy and trainer share it)."""
    return [0, 1] if CUDA_DEVICES >= 2 else [0]


@pytest.fixture(scope="session")
def smi_uuids():
    """nvidia-smi's UUID of each GPU index (PCI bus order)."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("needs nvidia-smi to compare device UUIDs")
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True, text=True, check=True
    ).stdout
    return {int(i): u.strip() for i, u in (line.split(",") for line in out.strip().splitlines())}
