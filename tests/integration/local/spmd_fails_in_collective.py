"""A torchrun-style script in which rank 1 raises after the rendezvous while rank 0 is in an
all-reduce with it (torch's default 30-minute group timeout); rank 0 writes how its wait ended."""

import argparse
import os
import pathlib

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

dist.init_process_group("gloo")
t = torch.tensor([1.0])
dist.all_reduce(t)  # both ranks are in the group
if os.environ["RANK"] == "1":
    raise RuntimeError("rank 1 fails after the rendezvous")
try:
    dist.all_reduce(t)  # rank 1 never joins this one
except Exception as exc:
    pathlib.Path(args.out, "rank0.txt").write_text(f"{type(exc).__name__}: {exc}")
    raise
