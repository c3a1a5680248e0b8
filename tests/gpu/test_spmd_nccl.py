"""SPMDActor.main ends the NCCL group a script leaves, on success and on failure, as the script's
process exit would under torchrun: the next run's ``init_process_group`` works on the same proc,
and a script raising after an NCCL collective fails ``main`` with its traceback, at once."""

import pytest
import torch

from mesh_client import ActorError, this_host
from mesh_client.spmd import SPMDActor
from tests.gpu.gpu_actors import on_gpus


def _run(actors, tmp_path, run, fail=False):
    addr, port = actors.slice(gpus=0).get_host_port.call_one(None).get(timeout=60)
    args = ["-m", "tests.gpu.spmd_nccl", "--out", str(tmp_path), "--run", str(run)]
    return actors.main.call(addr, port, [*args, "--fail"] if fail else args).get(timeout=120)


def test_an_nccl_group_a_script_leaves_ends_with_it_pass_or_fail(device_ids, tmp_path):
    if not torch.distributed.is_nccl_available():
        pytest.skip("needs NCCL: this torch build has none")
    n = len(device_ids)
    with this_host().spawn_procs(per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids), name="nccl") as procs:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        assert list(_run(actors, tmp_path, 0).values()) == [True] * n
        with pytest.raises(ActorError) as failed:
            _run(actors, tmp_path, 1, fail=True)
        assert "fails after an NCCL all-reduce" in failed.value.message
        assert "spmd_nccl.py" in failed.value.remote_traceback
        # The failed run's group was ended too: a third run initializes NCCL again.
        assert list(_run(actors, tmp_path, 2).values()) == [True] * n
    total = str(float(n * (n + 1) // 2))
    assert [(tmp_path / f"run{run}-rank{r}.txt").read_text() for run in range(3) for r in range(n)] == [total] * (3 * n)
