"""A torchrun-style NCCL script that leaves its group (as scripts under torchrun may): all-reduce
the rank on the GPU, write the sum under its run number, and raise afterwards if told to."""

import argparse
import os
import pathlib
from datetime import timedelta

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--run", required=True)
parser.add_argument("--fail", action="store_true")
args = parser.parse_args()

# Each proc sees its own GPU as cuda:0 (tests.gpu.gpu_actors.on_gpus).
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
dist.init_process_group("nccl", timeout=timedelta(seconds=120))
t = torch.tensor([float(dist.get_rank() + 1)], device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
pathlib.Path(args.out, f"run{args.run}-rank{os.environ['RANK']}.txt").write_text(str(t.item()))
if args.fail:
    raise RuntimeError(f"rank {os.environ['RANK']} fails after an NCCL all-reduce")
