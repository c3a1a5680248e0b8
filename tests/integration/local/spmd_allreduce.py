"""A torchrun-style script: init gloo from the env, all-reduce the rank, write what it saw."""

import argparse
import json
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.path.join(args.out, f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump({"sum": t.item(), "world": dist.get_world_size(), "local_rank": os.environ["LOCAL_RANK"]}, f)
dist.destroy_process_group()
