"""Round three: torchrun-style SPMD programs, ported from ``monarch.spmd`` to ``mesh_client.spmd``.

``python round_three.py <monarch.actor|mesh_client.actor> <scenario>`` prints one JSON line, as
:mod:`.programs` does; :mod:`.test_side_by_side` compares the lines of both implementations. The
spmd module is the one beside the actor API named (``monarch.spmd`` or ``mesh_client.spmd``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import tempfile

import torch

api = importlib.import_module(sys.argv[1])
spmd = importlib.import_module(sys.argv[1].split(".")[0] + ".spmd")
Actor, endpoint, this_host = api.Actor, api.endpoint, api.this_host

# The ranks and sizes; ours also set torchrun's TORCHELASTIC_* variables and its ROLE_NAME
# "default" (Monarch: "rank"), see the README's SPMD section.
ELASTIC = ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE",
           "ROLE_WORLD_SIZE")


class Collective(Actor):
    @endpoint
    def env(self) -> dict:
        out = {k: os.environ.get(k) for k in ELASTIC}
        out["has_master"] = bool(os.environ.get("MASTER_ADDR")) and bool(os.environ.get("MASTER_PORT"))
        return out

    @endpoint
    def all_reduce(self) -> list:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        return [dist.get_rank(), dist.get_world_size(), t.item()]


def scenario_spmd() -> dict:
    """Meshes with and without ``hosts``; then a slice, and the async twin with an explicit master."""
    out = {}
    for per_host in ({"hosts": 2, "gpus": 1}, {"replicas": 2, "gpus": 2}):
        procs = this_host().spawn_procs(per_host=per_host)
        spmd.setup_torch_elastic_env(procs)
        out[json.dumps(per_host)] = [[dict(p), v] for p, v in procs.spawn("coll", Collective).env.call().get().items()]
    out["reduce"] = list(procs.spawn("reduce", Collective).all_reduce.call().get(timeout=120).values())
    sliced = procs.slice(replicas=1)  # its ranks are the slice's
    spmd.setup_torch_elastic_env(sliced)
    out["slice"] = [[dict(p), v] for p, v in sliced.spawn("sliced", Collective).env.call().get().items()]
    asyncio.run(spmd.setup_torch_elastic_env_async(procs, master_addr="127.0.0.1", master_port=29777))
    out["async"] = [[v["RANK"], v["GROUP_RANK"], v["has_master"]] for v in procs.spawn("c2", Collective).env.call().get().values()]
    return out


SCRIPT = """
import json, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
keys = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE")
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump({"env": {k: os.environ[k] for k in keys}, "sum": t.item(), "argv": sys.argv[2:],
               "name": __name__}, f)
dist.destroy_process_group()
"""


def scenario_spmd_main() -> dict:
    procs = this_host().spawn_procs(per_host={"replicas": 2, "gpus": 1})
    actors = procs.spawn("_SPMDActor", spmd.SPMDActor)
    first = dict.fromkeys(procs._labels, 0)
    out: dict = {"labels": list(procs._labels)}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        addr, port = actors.slice(**first).get_host_port.call_one(None).get()
        out["addr_port_types"] = [type(addr).__name__, type(port).__name__]
        out["main"] = list(actors.main.call(addr, port, [script, tmp, "--lr", "0.1"]).get(timeout=120).values())
        out["ranks"] = [json.load(open(os.path.join(tmp, f"{r}.json"))) for r in range(2)]
        # Not compared: a script's sys.exit(2) is ours an ActorError (the actor lives on), Monarch's
        # a SupervisionError (its actor dies of any SystemExit); see the README's SPMD section.
    return out


if __name__ == "__main__":
    result = globals()[f"scenario_{sys.argv[2]}"]()
    print("OUTCOME " + json.dumps(result, sort_keys=True, default=repr), flush=True)
    os._exit(0)
