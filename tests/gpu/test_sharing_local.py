"""Two roles share GPUs on real hardware through the local backend.

Aspects: each proc sees exactly its listed device (torch's UUID equals nvidia-smi's for the
index); a role that allocates past its memory fraction gets an out-of-memory ActorError from its
own process while the other role keeps running; taking turns, with cached memory released
between turns; a co-located actor's memory shows in its host proc's report.
"""

from functools import partial

import pytest
import torch

from mesh_client import this_host
from tests.gpu import sharing_checks as checks
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
    yield trainer_procs, policy_procs.spawn("policy", Role), trainer_procs.spawn("trainer", Role)
    policy_procs.stop().get()
    trainer_procs.stop().get()


def test_each_proc_sees_exactly_its_device(roles, device_ids, smi_uuids):
    _, policy, trainer = roles
    checks.each_proc_sees_exactly_its_device(policy, trainer, device_ids, smi_uuids)


def test_over_the_cap_is_an_oom_in_that_role_only(roles):
    _, policy, trainer = roles
    checks.over_the_cap_is_an_oom_in_that_role_only(policy, trainer)


def test_taking_turns_releases_cached_memory(roles):
    _, policy, trainer = roles
    checks.taking_turns_releases_cached_memory(policy, trainer)


def test_colocated_actor_memory_shows_in_its_proc(roles):
    trainer_procs, _, trainer = roles
    checks.colocated_actor_memory_shows_in_its_proc(trainer_procs, trainer)
