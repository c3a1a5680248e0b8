"""A torchrun-style script that joins its group, says so, and waits for the test's word before
its last all-reduce: a job that is running while the test starts another on the same procs."""

import argparse
import os
import pathlib
import time
from datetime import timedelta

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--job", required=True)
args = parser.parse_args()
out, rank = pathlib.Path(args.out), os.environ["RANK"]

dist.init_process_group("gloo", timeout=timedelta(seconds=120))
(out / f"{args.job}-started{rank}").write_text(os.environ["MASTER_PORT"])
deadline = time.monotonic() + 120
while not (out / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
(out / f"{args.job}-rank{rank}").write_text(f"{t.item()} {os.environ['MASTER_PORT']}")
