"""Proc meshes shared by the local tests of one module (spawning costs ~0.1 s per proc)."""

import pytest

from mesh_client import this_host


@pytest.fixture(scope="module")
def procs():
    with this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2}, name="t") as mesh:
        yield mesh
