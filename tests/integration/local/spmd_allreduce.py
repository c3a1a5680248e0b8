"""A torchrun-style script: init gloo from the env, all-reduce the rank, write what it saw."""

import argparse
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

# A bounded rendezvous: a rank that cannot reach the store fails the call instead of hanging it.
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.path.join(args.out, f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump({"sum": t.item(), "world": dist.get_world_size(), "local_rank": os.environ["LOCAL_RANK"]}, f)
dist.destroy_process_group()
