"""SPMD on a local 2x2 mesh: the torchelastic env in every proc, and real gloo collectives,
both through setup_torch_elastic_env and through SPMDActor.main running a script; a rank whose
script fails fails ``main.call()`` at once with its remote traceback, and its peers' rendezvous
ends after the store timeout instead of torch's 30 minutes."""

import json
import os

import pytest

from mesh_client import Actor, ActorError, endpoint, this_host
from mesh_client.spmd import AddrType, SPMDActor, setup_torch_elastic_env
from tests.cluster import testing

CONTRACT = (
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
)


class Collective(Actor):
    @endpoint
    def env(self) -> dict:
        return {k: os.environ.get(k) for k in (*CONTRACT, "TORCHELASTIC_USE_AGENT_STORE")}

    @endpoint
    def all_reduce(self) -> float:
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        return t.item()


@pytest.fixture(scope="module")
def mesh():
    with this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2}, name="spmd") as procs:
        yield procs


def test_env_in_every_proc_follows_the_contract(mesh):
    setup_torch_elastic_env(mesh)
    envs = mesh.spawn("c", Collective).env.call().get()
    masters = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs.values()}
    run_ids = {e["TORCHELASTIC_RUN_ID"] for e in envs.values()}
    assert len(masters) == 1 and len(run_ids) == 1
    addr, port = masters.pop()
    assert addr == "127.0.0.1" and int(port) > 0
    for point, e in envs:
        assert all(e[k] is not None for k in CONTRACT), e
        assert e["RANK"] == str(point.rank) == e["ROLE_RANK"]
        assert e["LOCAL_RANK"] == str(point["gpus"]) and e["GROUP_RANK"] == str(point["hosts"])
        assert (e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_WORLD_SIZE"]) == ("4", "2", "2")
        assert e["TORCHELASTIC_USE_AGENT_STORE"] == "False"


def test_use_ipaddr_picks_the_family_of_the_master_address(mesh):
    setup_torch_elastic_env(mesh, use_ipaddr=AddrType.IPv4)  # the procs listen on 127.0.0.1
    envs = mesh.spawn("c4", Collective).env.call().get()
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"127.0.0.1"}
    with pytest.raises(ActorError, match="mesh_client.spmd.AddrType"):
        setup_torch_elastic_env(mesh, use_ipaddr="ipv4")


def test_gloo_all_reduce_across_the_mesh(mesh):
    setup_torch_elastic_env(mesh)
    sums = mesh.spawn("reduce", Collective).all_reduce.call().get()
    assert list(sums.values()) == [10.0] * 4  # 1 + 2 + 3 + 4


def test_spmd_actor_main_runs_a_module_as_torchrun_would(tmp_path):
    with this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2}, name="script") as procs:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        first = dict.fromkeys(procs._labels, 0)
        addr, port = actors.slice(**first).get_host_port.call_one(None).get()
        args = ["-m", "tests.integration.local.spmd_allreduce", "--out", str(tmp_path)]
        done = actors.main.call(addr, port, args).get()
    assert list(done.values()) == [True] * 4
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert [r["sum"] for r in results] == [10.0] * 4
    assert [r["local_rank"] for r in results] == ["0", "1", "0", "1"]


def test_master_must_be_given_whole(mesh):
    with pytest.raises(ValueError, match="both master_addr and master_port"):
        setup_torch_elastic_env(mesh, master_addr="127.0.0.1")


def test_a_failing_rank_fails_main_at_once_and_its_peers_rendezvous_ends(tmp_path):
    with this_host().spawn_procs(per_host={"gpus": 2}, name="failing") as procs:
        actors = procs.spawn("_SPMDActor", SPMDActor, store_timeout=3)  # rank 0 waits for rank 1 no longer
        addr, port = actors.slice(gpus=0).get_host_port.call_one(None).get()
        args = ["-m", "tests.integration.local.spmd_one_fails", "--out", str(tmp_path)]
        with pytest.raises(ActorError) as failed:
            actors.main.call(addr, port, args).get(timeout=120)
        assert "failing[gpus=1]" in failed.value.message  # the failed rank, not the waiting one
        assert "RuntimeError: rank 1 gives up before the rendezvous" in failed.value.message
        assert "spmd_one_fails.py" in failed.value.remote_traceback
        # Rank 0's actor answers again once its rendezvous gave up (it ran main meanwhile).
        assert actors.slice(gpus=0).get_host_port.call_one(None).get(timeout=120)
        ended = (tmp_path / "rank0.txt").read_text()
        assert "timeout" in ended.lower() or "timed out" in ended.lower(), ended



def test_main_runs_again_on_the_same_mesh_when_the_script_left_its_group(tmp_path):
    # Under torchrun the group ends with the script's process; here the proc lives on.
    with this_host().spawn_procs(per_host={"gpus": 2}, name="again") as procs:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        for run in range(2):
            addr, port = actors.slice(gpus=0).get_host_port.call_one(None).get()
            args = ["-m", "tests.integration.local.spmd_leaves_group", "--out", str(tmp_path), "--run", str(run)]
            assert list(actors.main.call(addr, port, args).get(timeout=120).values()) == [True, True]
    assert [(tmp_path / f"run{run}-rank{r}.txt").read_text() for run in range(2) for r in range(2)] == ["3.0"] * 4


def test_a_rank_failing_in_a_collective_ends_its_peers_wait(tmp_path):
    # Rank 1's group ends with its script: rank 0's all-reduce fails instead of waiting for
    # torch's 30 minutes, and its actor answers again.
    with this_host().spawn_procs(per_host={"gpus": 2}, name="midway") as procs:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        addr, port = actors.slice(gpus=0).get_host_port.call_one(None).get()
        args = ["-m", "tests.integration.local.spmd_fails_in_collective", "--out", str(tmp_path)]
        with pytest.raises(ActorError):
            actors.main.call(addr, port, args).get(timeout=120)
        assert actors.slice(gpus=0).get_host_port.call_one(None).get(timeout=120)
    assert (tmp_path / "rank0.txt").read_text()  # its all-reduce raised (gloo: the connection closed)


def test_a_second_job_on_the_same_procs_is_refused_while_one_runs(tmp_path):
    # The env, sys.argv and the default process group are one per process: a second job in
    # the same procs ran with the first one's (or the first with its) arguments and store.
    with this_host().spawn_procs(per_host={"gpus": 2}, name="twojobs") as procs:
        first, second = procs.spawn("first", SPMDActor), procs.spawn("second", SPMDActor)
        master = first.slice(gpus=0).get_host_port.call_one(None).get()
        running = first.main.call(*master, ["-m", "tests.integration.local.spmd_waits", "--out", str(tmp_path), "--job", "a"])
        started = [tmp_path / f"a-started{r}" for r in range(2)]
        testing.wait_for(lambda: all(p.exists() for p in started), "the first job in its group", timeout=120)
        other = second.slice(gpus=0).get_host_port.call_one(None).get()
        args = ["-m", "tests.integration.local.spmd_waits", "--out", str(tmp_path), "--job", "b"]
        with pytest.raises(ActorError, match=r"SPMD job 'first' \(-m tests.integration.local.spmd_waits .*\) is still "
                                             r"running in this proc. A proc runs one SPMD job at a time"):
            second.main.call(*other, args).get(timeout=120)
        with pytest.raises(ActorError, match="cannot set the torchelastic environment"):
            setup_torch_elastic_env(procs)
        (tmp_path / "go").write_text("")
        assert list(running.get(timeout=120).values()) == [True, True]
        assert list(second.main.call(*other, args).get(timeout=120).values()) == [True, True]  # once it ended
    port = str(master[1])
    assert [(tmp_path / f"a-rank{r}").read_text() for r in range(2)] == [f"3.0 {port}"] * 2
    assert [(tmp_path / f"b-rank{r}").read_text() for r in range(2)] == [f"3.0 {other[1]}"] * 2


def test_a_job_whose_broadcast_main_failed_its_actor_frees_the_procs(tmp_path, monkeypatch):
    """A main that fails its actor (a broadcast: no caller takes the error) left the proc held
    by its job for good: the job's end was queued after the reply and the failed actor's
    thread ended without running it, so every later job waited 60 s and was refused."""
    import mesh_client.actor

    faults = []
    monkeypatch.setattr(mesh_client.actor, "unhandled_fault_hook", faults.append)
    (tmp_path / "bad.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "good.py").write_text(
        "import os, pathlib\npathlib.Path(os.environ['OUT'], 'good' + os.environ['RANK']).write_text('ran')\n")
    monkeypatch.setenv("OUT", str(tmp_path))
    with this_host().spawn_procs(per_host={"gpus": 1}, name="failedjob") as procs:
        bad = procs.spawn("bad", SPMDActor)
        master = bad.get_host_port.call_one(None).get(timeout=60)
        bad.main.broadcast(*master, [str(tmp_path / "bad.py")])
        testing.wait_for(lambda: faults or None, "the failed job's fault", timeout=120)
        assert "exited with code 3" in str(faults[0]), faults
        good = procs.spawn("good", SPMDActor)
        assert good.main.call_one(*master, [str(tmp_path / "good.py")]).get(timeout=30) is True
    assert (tmp_path / "good0").read_text() == "ran"
