"""A/B of two procmesh checkouts on the call figures, runs alternating, for a noisy machine.

Each run is a fresh process with one checkout on its path: spawn 8 local procs, then the median
of 1500 ``call_one`` no-ops on one actor and of 300 ``call()`` fan-outs to all 8, and the CPU time
per ``call_one`` of the controller and of the proc (all their threads); then 10,000 pipelined
``call_one``s and the median of 200 echoes of 1 MiB. Runs alternate between the checkouts, so
load that comes and goes hits both alike.

    python benchmarks/call_ab.py /tmp/main-snap . --runs 8          # table
    python benchmarks/call_ab.py /tmp/main-snap . --runs 8 --json   # JSON
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKLOAD = """
import json, os, statistics, time
from mesh_client import Actor, endpoint, this_host

class Echo(Actor):
    @endpoint
    def noop(self):
        return None

    @endpoint
    def echo(self, value):
        return value

    @endpoint
    def cpu(self):
        return time.process_time()  # every thread of the proc: I/O thread and actor thread

procs = this_host().spawn_procs(per_host={"gpus": 8})
actors = procs.spawn("echo", Echo)
one = actors.slice(gpus=0)
for _ in range(300):
    one.noop.call_one().get()
lat = []
mine, theirs = time.process_time(), one.cpu.call_one().get()
for _ in range(1500):
    t = time.perf_counter(); one.noop.call_one().get(); lat.append(time.perf_counter() - t)
theirs, mine = one.cpu.call_one().get() - theirs, time.process_time() - mine
fan = []
for _ in range(300):
    t = time.perf_counter(); actors.noop.call().get(); fan.append(time.perf_counter() - t)
t = time.perf_counter()
futures = [one.noop.call_one() for _ in range(10000)]
for f in futures:
    f.get()
pipelined = 10000 / (time.perf_counter() - t)
blob = os.urandom(1 << 20)
big = []
for _ in range(200):
    t = time.perf_counter(); back = one.echo.call_one(blob).get(); big.append(time.perf_counter() - t)
assert back == blob
print(json.dumps({"call_one_p50_us": statistics.median(lat) * 1e6, "fanout8_p50_us": statistics.median(fan) * 1e6,
                  "controller_cpu_us_per_call": mine / 1500 * 1e6, "proc_cpu_us_per_call": theirs / 1500 * 1e6,
                  "pipelined_calls_per_s": pipelined, "echo_1mib_p50_us": statistics.median(big) * 1e6}))
procs.stop().get()
"""

# CPU time per call is what the call path costs, and varies far less with the machine's load
# than latency does (a loaded 2-core machine delays wake-ups, not work).
KEYS = ("call_one_p50_us", "fanout8_p50_us", "controller_cpu_us_per_call", "proc_cpu_us_per_call",
        "pipelined_calls_per_s", "echo_1mib_p50_us")


def one_run(checkout: str) -> dict[str, float]:
    root = os.path.abspath(checkout)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "operator")]))
    done = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, timeout=300, cwd=root)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"the run on {checkout} printed no figures (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="checkout A (e.g. a git archive of main)")
    parser.add_argument("candidate", help="checkout B")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {args.baseline: [], args.candidate: []}
    for _ in range(args.runs):
        for checkout in (args.baseline, args.candidate):
            results[checkout].append(one_run(checkout))
    summary = {
        checkout: {
            key: {"median": statistics.median(r[key] for r in runs),
                  "best": (max if key == "pipelined_calls_per_s" else min)(r[key] for r in runs)}
            for key in KEYS
        }
        for checkout, runs in results.items()
    }
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'metric':28} {'checkout':30} {'median':>9} {'best':>9}")
    for key in KEYS:
        for checkout in results:
            row = summary[checkout][key]
            print(f"{key:28} {checkout[-30:]:30} {row['median']:9.1f} {row['best']:9.1f}")


if __name__ == "__main__":
    main()
