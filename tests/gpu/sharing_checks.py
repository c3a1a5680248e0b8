"""The GPU-sharing assertions, shared by the local and the operator variants.

Each takes the two roles (actor meshes of ``Role``), the trainer's proc mesh, and the devices.
"""

import pytest
import torch

from mesh_client import ActorError
from tests.gpu.gpu_actors import Role


def first_point(values):
    return dict.fromkeys(values.sizes, 0)


def each_proc_sees_exactly_its_device(policy, trainer, expected):
    """``expected(role, point)``: the UUID the proc at ``point`` of ``role`` must see."""
    for name, role in (("policy", policy), ("trainer", trainer)):
        seen = list(role.device.call().get())
        for point, info in seen:
            assert info["count"] == 1
            assert info["uuid"] == expected(name, point)
        assert len({info["uuid"] for _, info in seen}) == len(seen)  # one device per proc


def over_the_cap_is_an_oom_in_that_role_only(policy, trainer):
    with pytest.raises(ActorError) as info:
        policy.allocate.call(0.5).get()  # the policy is capped at 0.3 of the device
    assert isinstance(info.value.exception, torch.OutOfMemoryError)
    # the trainer, sharing the same GPUs, keeps working and can use its own larger share
    assert all(v > 0 for v in trainer.work.call().get().values())
    assert all(v > 0 for v in trainer.allocate.call(0.4).get().values())
    trainer.release.call().get()
    # and the policy itself survived its OOM
    assert all(v > 0 for v in policy.work.call().get().values())


def taking_turns_releases_cached_memory(policy, trainer):
    for _ in range(2):
        policy.allocate.call(0.2).get()
        held = policy.memory.call().get()
        after = policy.release.call(True).get()
        for point, mem in held:
            assert after.item(**point)["reserved"] < mem["reserved"]
        trainer.allocate.call(0.5).get()  # fits only because the policy gave its cache back
        trainer.release.call(True).get()


def colocated_actor_memory_shows_in_its_proc(trainer_procs, trainer):
    before = trainer.memory.call().get()
    reference = trainer_procs.spawn("reference", Role, 256)
    reference.initialized.get()  # spawn returns at once (as Monarch's): wait for its __init__
    after = trainer.memory.call().get()
    for point, mem in after:
        assert mem["allocated"] - before.item(**point)["allocated"] >= 256 << 20
    reference.stop().get()
