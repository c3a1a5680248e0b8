"""A torchrun-style script that ends without destroy_process_group (as many do: under torchrun
its process's exit ends the group): all-reduce the rank, write the sum under its run number."""

import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--run", required=True)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=120))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.path.join(args.out, f"run{args.run}-rank{os.environ['RANK']}.txt"), "w") as f:
    f.write(str(t.item()))
