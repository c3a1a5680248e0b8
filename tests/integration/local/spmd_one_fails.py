"""A torchrun-style script in which rank 1 fails before the rendezvous; the others wait for it
with torch's own timeout (30 min) and write down how their wait ended."""

import argparse
import os
import pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
rank = os.environ["RANK"]
if rank == "1":
    # Before importing torch: the others' wait (3 s in the test) starts after their own import,
    # which under load can end seconds before this rank's would (the test then saw rank 0's
    # timeout first, not this failure).
    raise RuntimeError("rank 1 gives up before the rendezvous")

import torch.distributed as dist  # noqa: E402 - after rank 1's failure, above

try:
    dist.init_process_group("gloo")  # no timeout of its own: torch's 30 minutes
except Exception as exc:
    pathlib.Path(args.out, f"rank{rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
    raise
