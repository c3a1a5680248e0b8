"""A/B of two procmesh checkouts on the call figures, runs alternating, for a noisy machine.

Each run is a fresh process with one checkout on its path: first the floor (``RAW``: plain
pickle/TCP, one thread per side, to 8 echo processes), then spawn 8 local procs, and the median
of 1500 ``call_one`` no-ops on one actor and of 300 ``call()`` fan-outs to all 8, and the CPU time
per ``call_one`` of the controller and of the proc, and per fan-out of the controller and of the
8 procs together (all their threads); then 10,000 pipelined
``call_one``s (and their CPU time per call on each side) and the median of 200 echoes of 1 MiB. Runs alternate between the checkouts, so
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
from typing import Any

from actors import ECHO_SERVER

# The floor, measured first in every run: a pickle over plain TCP to 8 echo processes, one
# thread on each side (no I/O threads, no hand-offs): one round trip, a fan-out to all 8, and
# the CPU time per round trip of the client and of one server.
RAW = ECHO_SERVER

WORKLOAD = """
import json, os, pickle, socket, statistics, struct, subprocess, sys, time
from mesh_client import Actor, endpoint, this_host

servers = [subprocess.Popen([sys.executable, "-c", RAW], stdout=subprocess.PIPE) for _ in range(8)]
socks = [socket.create_connection(("127.0.0.1", int(s.stdout.readline()))) for s in servers]
for s in socks:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

def send(sock, obj):
    data = pickle.dumps(obj, protocol=5)
    sock.sendall(struct.pack("!Q", len(data)) + data)

def receive(sock):
    head = b""
    while len(head) < 8:
        head += sock.recv(8 - len(head))
    (n,) = struct.unpack("!Q", head)
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return pickle.loads(body)

def raw_call(sock, obj):
    send(sock, obj)
    return receive(sock)

for _ in range(300):
    raw_call(socks[0], ("noop", (), {}))
raw_lat = []
mine, theirs = time.process_time(), raw_call(socks[0], "cpu")
for _ in range(1500):
    t = time.perf_counter(); raw_call(socks[0], ("noop", (), {})); raw_lat.append(time.perf_counter() - t)
theirs, mine = raw_call(socks[0], "cpu") - theirs, time.process_time() - mine
raw_fan = []
for _ in range(300):
    t = time.perf_counter()
    for s in socks:
        send(s, ("noop", (), {}))
    for s in socks:
        receive(s)
    raw_fan.append(time.perf_counter() - t)
raw = {"raw_call_p50_us": statistics.median(raw_lat) * 1e6, "raw_fanout8_p50_us": statistics.median(raw_fan) * 1e6,
       "raw_client_cpu_us_per_call": mine / 1500 * 1e6, "raw_server_cpu_us_per_call": theirs / 1500 * 1e6}
for s in socks:
    s.close()
for s in servers:
    s.kill(); s.wait()

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
cpu_theirs, cpu_mine = one.cpu.call_one().get() - theirs, time.process_time() - mine
fan = []
mine, theirs = time.process_time(), actors.cpu.call().get()
for _ in range(300):
    t = time.perf_counter(); actors.noop.call().get(); fan.append(time.perf_counter() - t)
after, mine = actors.cpu.call().get(), time.process_time() - mine
fan_procs = sum(after.item(gpus=g) - theirs.item(gpus=g) for g in range(8))
mine, theirs = time.process_time(), one.cpu.call_one().get()
t = time.perf_counter()
futures = [one.noop.call_one() for _ in range(10000)]
for f in futures:
    f.get()
pipelined = 10000 / (time.perf_counter() - t)
pipe_theirs, pipe_mine = one.cpu.call_one().get() - theirs, time.process_time() - mine
blob = os.urandom(1 << 20)
big = []
for _ in range(200):
    t = time.perf_counter(); back = one.echo.call_one(blob).get(); big.append(time.perf_counter() - t)
assert back == blob
print(json.dumps({**raw, "call_one_p50_us": statistics.median(lat) * 1e6, "fanout8_p50_us": statistics.median(fan) * 1e6,
                  "controller_cpu_us_per_call": cpu_mine / 1500 * 1e6, "proc_cpu_us_per_call": cpu_theirs / 1500 * 1e6,
                  "controller_cpu_us_per_fanout": mine / 300 * 1e6, "procs_cpu_us_per_fanout": fan_procs / 300 * 1e6,
                  "pipelined_calls_per_s": pipelined, "controller_cpu_us_per_pipelined": pipe_mine / 10000 * 1e6,
                  "proc_cpu_us_per_pipelined": pipe_theirs / 10000 * 1e6, "echo_1mib_p50_us": statistics.median(big) * 1e6}))
procs.stop().get()
"""

# CPU time per call is what the call path costs, and varies far less with the machine's load
# than latency does (a loaded 2-core machine delays wake-ups, not work).
KEYS = ("call_one_p50_us", "fanout8_p50_us", "controller_cpu_us_per_call", "proc_cpu_us_per_call",
        "controller_cpu_us_per_fanout", "procs_cpu_us_per_fanout",
        "pipelined_calls_per_s", "controller_cpu_us_per_pipelined", "proc_cpu_us_per_pipelined", "echo_1mib_p50_us",
        "raw_call_p50_us", "raw_fanout8_p50_us", "raw_client_cpu_us_per_call", "raw_server_cpu_us_per_call")


def run_in(checkout: str, code: str, *args: str) -> Any:
    """Run ``code`` with ``checkout``'s procmesh on the path; the last JSON line it printed."""
    root = os.path.abspath(checkout)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "operator")]))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300, cwd=root)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"the run on {checkout} printed no figures (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


def one_run(checkout: str) -> dict[str, float]:
    figures: dict[str, float] = run_in(checkout, f"RAW = {RAW!r}\n" + WORKLOAD)
    return figures


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
