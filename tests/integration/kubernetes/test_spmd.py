"""torchrun-style SPMD through the operator: a gloo all-reduce across a 2x2 ProcMesh; an
SPMDActor spawned as Monarch's (no arguments) gets the ProcMesh's run id, restart count and
maxRestarts, also once respawned after the operator restarted the mesh, and runs again."""

import pytest

from mesh_client.kubernetes import attach
from mesh_client.spmd import SPMDActor, setup_torch_elastic_env
from tests.cluster import testing
from tests.integration.kubernetes.test_restarts import kill
from tests.integration.local.test_spmd import Collective
from tests.integration.operator.support import condition, create_mesh, get_mesh

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


def elastic(actors, master):
    envs = actors.setup_env.call(*master).get(timeout=60).values()
    return {(e["TORCHELASTIC_RUN_ID"], e["TORCHELASTIC_RESTART_COUNT"], e["TORCHELASTIC_MAX_RESTARTS"]) for e in envs}


def test_a_spmd_actor_counts_the_operators_restarts(kube, custom, namespace, operator, faults, tmp_path):
    made = create_mesh(custom, namespace, "elastic", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                       restartPolicy="RestartMesh", maxRestarts=3)
    run_id = f"elastic-{made['metadata']['uid'][:8]}"
    mesh = attach("elastic", namespace, api_client=kube, timeout=180)
    spmd = mesh.spawn("_SPMDActor", SPMDActor)  # as Monarch's docs do: no arguments
    first = spmd.slice(hosts=0, gpus=0)
    assert elastic(spmd, first.get_host_port.call_one(None).get()) == {(run_id, "0", "3")}

    kill(mesh, 1)

    def restarted():
        m = get_mesh(custom, namespace, "elastic")
        fresh = condition(m, "Ready").get("observedGeneration") == m["metadata"]["generation"]
        return fresh and condition(m, "Ready").get("status") == "True" and m["status"].get("restarts") == 1

    testing.wait_for(restarted, "the operator's restart of the mesh", timeout=120)
    mesh.respawn()
    master = first.get_host_port.call_one(None).get()
    assert elastic(spmd, master) == {(run_id, "1", "3")}  # a resuming script sees the restart
    args = ["-m", "tests.integration.local.spmd_leaves_group", "--out", str(tmp_path), "--run", "1"]
    assert list(spmd.main.call(*master, args).get(timeout=120).values()) == [True, True]
    assert [(tmp_path / f"run1-rank{r}.txt").read_text() for r in range(2)] == ["3.0"] * 2
