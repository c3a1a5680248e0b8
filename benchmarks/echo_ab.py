"""A/B of two procmesh checkouts on 1 MiB echoes of bytes, bytearray and numpy, runs alternating.

Each run is a fresh process with one checkout on its path: one local proc, then for each payload
type the median of ``--echoes`` sequential 1 MiB echoes, the CPU time per echo of the controller
and of the proc (every thread), and their minor page faults per echo (fresh memory being
touched: what a receive buffer that is not reused costs). numpy and torch (a CPU float32
tensor) are skipped where they are not installed. Runs alternate between the checkouts, so load that comes and goes hits both alike.

    python benchmarks/echo_ab.py /tmp/main-snap . --runs 6          # table
    python benchmarks/echo_ab.py /tmp/main-snap . --runs 6 --json   # JSON
"""

from __future__ import annotations

import argparse
import json
import statistics

from call_ab import run_in

WORKLOAD = """
import json, os, resource, statistics, sys, time
from mesh_client import Actor, endpoint, this_host

def usage():
    return time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt

class Echo(Actor):
    @endpoint
    def echo(self, value):
        return value

    @endpoint
    def usage(self):
        return usage()

MIB = 1 << 20
payloads = {"bytes": os.urandom(MIB), "bytearray": bytearray(os.urandom(MIB))}
try:
    import numpy
    payloads["numpy"] = numpy.frombuffer(bytearray(os.urandom(MIB)), dtype=numpy.uint8)
except ImportError:
    pass
try:
    import torch
    payloads["torch"] = torch.randn(MIB // 4)  # random bits as floats would hold NaNs, never equal
except ImportError:
    pass
procs = this_host().spawn_procs(per_host={"gpus": 1})
one = procs.spawn("echo", Echo)
out = {}
echoes = int(sys.argv[1])
for kind, blob in payloads.items():
    for _ in range(30):
        back = one.echo.call_one(blob).get()
    assert type(back) is type(blob) and (back.equal(blob) if kind == "torch" else bytes(back) == bytes(blob))
    lat = []
    mine, theirs = usage(), one.usage.call_one().get()
    for _ in range(echoes):
        t = time.perf_counter(); one.echo.call_one(blob).get(); lat.append(time.perf_counter() - t)
    theirs_after, mine_after = one.usage.call_one().get(), usage()
    out[kind] = {"echo_p50_us": statistics.median(lat) * 1e6,
                 "controller_cpu_us": (mine_after[0] - mine[0]) / echoes * 1e6,
                 "proc_cpu_us": (theirs_after[0] - theirs[0]) / echoes * 1e6,
                 "controller_faults": (mine_after[1] - mine[1]) / echoes,
                 "proc_faults": (theirs_after[1] - theirs[1]) / echoes}
print(json.dumps(out))
procs.stop().get()
"""

FIGURES = ("echo_p50_us", "controller_cpu_us", "proc_cpu_us", "controller_faults", "proc_faults")


def one_run(checkout: str, echoes: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = run_in(checkout, WORKLOAD, str(echoes))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="checkout A (e.g. a git archive of main)")
    parser.add_argument("candidate", help="checkout B")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--echoes", type=int, default=300, help="echoes per payload type per run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, dict[str, float]]]] = {args.baseline: [], args.candidate: []}
    for _ in range(args.runs):
        for checkout in (args.baseline, args.candidate):
            results[checkout].append(one_run(checkout, args.echoes))
    summary = {
        checkout: {
            kind: {key: {"median": statistics.median(r[kind][key] for r in runs), "best": min(r[kind][key] for r in runs)}
                   for key in FIGURES}
            for kind in runs[0]
        }
        for checkout, runs in results.items()
    }
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'payload':10} {'figure':18} {'checkout':30} {'median':>9} {'best':>9}")
    for kind in summary[args.baseline]:
        for key in FIGURES:
            for checkout in results:
                row = summary[checkout][kind][key]
                print(f"{kind:10} {key:18} {checkout[-30:]:30} {row['median']:9.1f} {row['best']:9.1f}")


if __name__ == "__main__":
    main()
