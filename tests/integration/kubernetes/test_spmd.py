"""torchrun-style SPMD through the operator: a gloo all-reduce across a 2x2 ProcMesh."""

import pytest

from mesh_client.kubernetes import attach
from mesh_client.spmd import setup_torch_elastic_env
from tests.integration.local.test_spmd import Collective
from tests.integration.operator.support import create_mesh

pytestmark = pytest.mark.cluster


def test_gloo_all_reduce_on_a_two_by_two_proc_mesh(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "ddp", hosts=2, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("ddp", namespace, api_client=kube, timeout=180)
    setup_torch_elastic_env(mesh)
    actors = mesh.spawn("c", Collective)
    envs = actors.env.call().get()
    for point, env in envs:
        assert env["RANK"] == str(point.rank)
        assert env["GROUP_RANK"] == str(point["hosts"]) and env["LOCAL_RANK"] == str(point["gpus"])
        assert env["MASTER_ADDR"] == mesh._group.addresses[0][0]  # rank 0's pod IP
    assert list(actors.all_reduce.call().get().values()) == [10.0] * 4
