"""Two roles share GPUs on real hardware through the local backend.

Aspects: each proc sees exactly its listed device (torch's UUID equals nvidia-smi's for the
index); a role that allocates past its memory fraction gets an out-of-memory ActorError from its
own process while the other role keeps running; taking turns, with cached memory released
between turns; a co-located actor's memory shows in its host proc's report.
"""

from functools import partial

import pytest
import torch

from mesh_client import ActorError, this_host
from tests.gpu.gpu_actors import Role, on_gpus


@pytest.fixture(scope="module")
def roles(device_ids):
    n = len(device_ids)
    policy_procs = this_host().spawn_procs(
        per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
        bootstrap=partial(torch.cuda.set_per_process_memory_fraction, 0.3), name="policy",
    )
    trainer_procs = this_host().spawn_procs(
        per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
        bootstrap=partial(torch.cuda.set_per_process_memory_fraction, 0.6), name="trainer",
    )
    yield policy_procs, trainer_procs, policy_procs.spawn("policy", Role), trainer_procs.spawn("trainer", Role)
    policy_procs.stop().get()
    trainer_procs.stop().get()


def test_each_proc_sees_exactly_its_device(roles, device_ids, smi_uuids):
    _, _, policy, trainer = roles
    for role in (policy, trainer):
        for point, info in role.device.call().get():
            assert info["count"] == 1
            assert info["uuid"] == smi_uuids[device_ids[point["gpus"]]]


def test_over_the_cap_is_an_oom_in_that_role_only(roles):
    _, _, policy, trainer = roles
    with pytest.raises(ActorError) as info:
        policy.allocate.call(0.5).get()  # the policy is capped at 0.3 of the device
    assert isinstance(info.value.exception, torch.OutOfMemoryError)
    # the trainer, sharing the same GPUs, keeps working and can use its own larger share
    assert all(v > 0 for v in trainer.work.call().get().values())
    assert all(v > 0 for v in trainer.allocate.call(0.4).get().values())
    trainer.release.call().get()
    # and the policy itself survived its OOM
    assert all(v > 0 for v in policy.work.call().get().values())


def test_taking_turns_releases_cached_memory(roles):
    _, _, policy, trainer = roles
    for _ in range(2):
        policy.allocate.call(0.2).get()
        held = policy.memory.call().get()
        after = policy.release.call(True).get()
        for point, mem in held:
            assert after.item(**point)["reserved"] < mem["reserved"]
        trainer.allocate.call(0.5).get()  # fits only because the policy gave its cache back
        trainer.release.call(True).get()


def test_colocated_actor_memory_shows_in_its_proc(roles):
    _, trainer_procs, _, trainer = roles
    before = trainer.memory.call().get()
    reference = trainer_procs.spawn("reference", Role, 256)
    after = trainer.memory.call().get()
    for point, mem in after:
        assert mem["allocated"] - before.item(**point)["allocated"] >= 256 << 20
    reference.stop().get()
