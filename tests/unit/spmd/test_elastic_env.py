"""The torchelastic env contract for every point of a mesh (pure)."""

import itertools

from mesh_client.spmd import torchelastic_env

KEYS = {
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCHELASTIC_USE_AGENT_STORE",
}


def env(coords, labels, sizes, **kw):
    return torchelastic_env(coords, labels, sizes, master_addr="10.0.0.1", master_port=29500, run_id="r", **kw)


def test_every_variable_of_the_contract_and_never_an_agent_store():
    e = env({"hosts": 1, "gpus": 1}, ["hosts", "gpus"], [2, 2], restart_count=1, max_restarts=3)
    assert set(e) == KEYS
    assert e["TORCHELASTIC_USE_AGENT_STORE"] == "False"
    assert (e["TORCHELASTIC_RESTART_COUNT"], e["TORCHELASTIC_MAX_RESTARTS"]) == ("1", "3")


def test_two_by_two_ranks():
    seen = []
    for h, g in itertools.product(range(2), range(2)):
        e = env({"hosts": h, "gpus": g}, ["hosts", "gpus"], [2, 2])
        seen.append((e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"], e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_WORLD_SIZE"]))
    assert seen == [
        ("0", "0", "0", "4", "2", "2"),
        ("1", "1", "0", "4", "2", "2"),
        ("2", "0", "1", "4", "2", "2"),
        ("3", "1", "1", "4", "2", "2"),
    ]


def test_hosts_form_the_groups_when_per_host_has_two_dimensions():
    # hosts=2, perHost a=2, gpus=4: the group is the host, not RANK // LOCAL_WORLD_SIZE
    e = env({"hosts": 1, "a": 1, "gpus": 3}, ["hosts", "a", "gpus"], [2, 2, 4])
    assert e["RANK"] == str(1 * 8 + 1 * 4 + 3)
    assert e["GROUP_RANK"] == "1" and e["GROUP_WORLD_SIZE"] == "2"
    assert e["LOCAL_RANK"] == "3" and e["LOCAL_WORLD_SIZE"] == "4" and e["WORLD_SIZE"] == "16"


def test_a_local_mesh_is_one_group():
    e = env({"gpus": 1}, ["gpus"], [2])
    assert (e["GROUP_RANK"], e["GROUP_WORLD_SIZE"], e["LOCAL_RANK"]) == ("0", "1", "1")


def test_a_mesh_without_hosts_counts_groups_of_its_last_dimension():
    # replicas=2 x gpus=2 locally, as Monarch's SPMDActor: two groups of two; each proc its own
    # (GROUP_RANK, LOCAL_RANK) (it was one group of 'LOCAL_WORLD_SIZE 2' with WORLD_SIZE 4, and
    # ranks 0 and 2 both said group 0, local rank 0)
    labels, sizes = ["a", "replicas", "gpus"], [1, 2, 2]
    seen = [env(dict(zip(labels, (0, r, g))), labels, sizes) for r, g in itertools.product(range(2), range(2))]
    assert [(e["RANK"], e["GROUP_RANK"], e["LOCAL_RANK"], e["GROUP_WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["WORLD_SIZE"])
            for e in seen] == [("0", "0", "0", "2", "2", "4"), ("1", "0", "1", "2", "2", "4"),
                               ("2", "1", "0", "2", "2", "4"), ("3", "1", "1", "2", "2", "4")]


def test_a_mesh_of_hosts_alone_has_one_proc_per_group():
    # hosts=2 without perHost (or a hosts x gpus mesh sliced to one gpu): two machines, as
    # torchrun --nnodes=2 --nproc-per-node=1 (LOCAL_RANK 1 would name a GPU host 1 lacks).
    seen = [env({"hosts": h}, ["hosts"], [2]) for h in range(2)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"], e["GROUP_WORLD_SIZE"], e["WORLD_SIZE"])
            for e in seen] == [("0", "0", "1", "0", "2", "2"), ("1", "0", "1", "1", "2", "2")]
