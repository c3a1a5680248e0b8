"""What ``procmesh top`` shows, from a proc on a real GPU: the proc's own answer over the
authenticated wire (DESCRIBE) carries its allocator's allocated and reserved bytes and the cap
its memory fraction sets; nothing is reported by a proc that never touched CUDA."""

from functools import partial

import torch

from mesh_client import this_host
from mesh_client._src.cli import tables
from mesh_client._src.runtime.identifying import identify_proc
from tests.gpu.gpu_actors import Role, on_gpus

FRACTION = 0.25


def test_describe_reports_gpu_memory_against_the_cap(device_ids):
    procs = this_host().spawn_procs(
        per_host={"gpus": 1}, bootstrap_command=on_gpus(device_ids[:1]),
        bootstrap=partial(torch.cuda.set_per_process_memory_fraction, FRACTION), name="topped")
    try:
        address, token = procs._group.addresses[0], procs._group.token
        role = procs.spawn("role", Role, 512)  # 512 MiB resident
        seen = role.memory.call_one().get()
        memory = identify_proc(address, token)["memory"]
        total = torch.cuda.get_device_properties(device_ids[0]).total_memory
        assert memory["allocated"] == seen["allocated"] >= 512 << 20
        assert memory["reserved"] == seen["reserved"] >= memory["allocated"]
        assert memory["total"] == total and memory["cap"] == int(total * FRACTION)
        row = tables.top_row({"rank": 0, "pod": "-"}, identify_proc(address, token), None)
        assert row[3] == f"{memory['allocated'] / 2**20:.0f}Mi" and row[7] == "1"
    finally:
        procs.stop().get()


def test_a_proc_without_cuda_reports_no_memory():
    procs = this_host().spawn_procs(per_host={"procs": 1}, name="no-cuda")
    try:
        assert identify_proc(procs._group.addresses[0], procs._group.token)["memory"] is None
    finally:
        procs.stop().get()
