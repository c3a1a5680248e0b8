"""A/B of two procmesh checkouts on the call figures, runs alternating, for a noisy machine.

Each run is a fresh process with one checkout on its path: first the floors (``RAW``: plain
pickle over TCP, then over AF_UNIX, one thread per side, to 8 echo processes, and a 1 MiB echo),
then spawn 8 local procs, and the median of 1500 ``call_one`` no-ops on one actor and of 300
``call()`` fan-outs to all 8, and the CPU time
per ``call_one`` of the controller and of the proc, and per fan-out of the controller and of the
8 procs together (all their threads); then 10,000 pipelined
``call_one``s (and their CPU time per call on each side) and the median of 200 echoes of 1 MiB. Runs alternate between the checkouts, so
load that comes and goes hits both alike.

    python benchmarks/call_ab.py /tmp/main-snap . --runs 8          # table
    python benchmarks/call_ab.py /tmp/main-snap . --runs 8 --json   # JSON

An arm may carry environment for its runs after an ``@`` (``K=V`` pairs, comma-separated), and
there may be more than two; e.g. the spin of the waits (``PROCMESH_SPIN_US``) on and off:

    python benchmarks/call_ab.py /tmp/main-snap .@PROCMESH_SPIN_US=0 .@PROCMESH_SPIN_US=100 --runs 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from actors import ECHO_SERVER, SERVER_PRELUDE
from large_stages import FLOOR_BODY

# The floor, measured first in every run over each transport procmesh uses (TCP, and AF_UNIX for
# local procs): a pickle to 8 echo processes, one thread on each side (no I/O threads, no
# hand-offs): one round trip, a fan-out to all 8, the CPU time per round trip of the client and
# of one server; and a copy-free 1 MiB echo (``FLOOR``: one buffer each side, no pickle).
RAW = ECHO_SERVER
FLOOR = SERVER_PRELUDE + FLOOR_BODY

WORKLOAD = """
import json, os, pickle, socket, statistics, struct, subprocess, sys, tempfile, time
from mesh_client import Actor, endpoint, this_host

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

def connected(code, transport, count, workdir):
    if transport == "unix":
        paths = [os.path.join(workdir, f"{len(os.listdir(workdir))}-{i}") for i in range(count)]
        servers = [subprocess.Popen([sys.executable, "-c", code, "unix", p], stdout=subprocess.PIPE) for p in paths]
        socks = []
        for server, path in zip(servers, paths):
            assert server.stdout.readline().strip() == b"ready"
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); socks.append(s)
        return servers, socks
    servers = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(count)]
    socks = [socket.create_connection(("127.0.0.1", int(s.stdout.readline()))) for s in servers]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return servers, socks

def floor(transport, prefix, workdir):
    servers, socks = connected(RAW, transport, 8, workdir)
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
    for s in socks:
        s.close()
    for s in servers:
        s.kill(); s.wait()
    # 1 MiB, copy-free: sent from one buffer, received into one buffer, echoed back as it came.
    servers, (sock,) = connected(FLOOR, transport, 1, workdir)
    out, buf = memoryview(os.urandom(1 << 20)), bytearray(1 << 20)
    view, raw_big = memoryview(buf), []
    for i in range(220):
        t = time.perf_counter(); sock.sendall(out); got = 0
        while got < len(buf):
            got += sock.recv_into(view[got:])
        if i >= 20:
            raw_big.append(time.perf_counter() - t)
    sock.close(); servers[0].kill(); servers[0].wait()
    return {f"{prefix}call_p50_us": statistics.median(raw_lat) * 1e6, f"{prefix}fanout8_p50_us": statistics.median(raw_fan) * 1e6,
            f"{prefix}client_cpu_us_per_call": mine / 1500 * 1e6, f"{prefix}server_cpu_us_per_call": theirs / 1500 * 1e6,
            f"{prefix}echo_1mib_p50_us": statistics.median(raw_big) * 1e6}

with tempfile.TemporaryDirectory(prefix="pm-raw-") as workdir:
    raw = {**floor("tcp", "raw_", workdir), **floor("unix", "raw_unix_", workdir)}

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
after, fan_mine = actors.cpu.call().get(), time.process_time() - mine
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
                  "controller_cpu_us_per_fanout": fan_mine / 300 * 1e6, "procs_cpu_us_per_fanout": fan_procs / 300 * 1e6,
                  "pipelined_calls_per_s": pipelined, "controller_cpu_us_per_pipelined": pipe_mine / 10000 * 1e6,
                  "proc_cpu_us_per_pipelined": pipe_theirs / 10000 * 1e6, "echo_1mib_p50_us": statistics.median(big) * 1e6}))
procs.stop().get()
"""

# CPU time per call is what the call path costs, and varies far less with the machine's load
# than latency does (a loaded 2-core machine delays wake-ups, not work).
KEYS = ("call_one_p50_us", "fanout8_p50_us", "controller_cpu_us_per_call", "proc_cpu_us_per_call",
        "controller_cpu_us_per_fanout", "procs_cpu_us_per_fanout",
        "pipelined_calls_per_s", "controller_cpu_us_per_pipelined", "proc_cpu_us_per_pipelined", "echo_1mib_p50_us",
        "raw_call_p50_us", "raw_fanout8_p50_us", "raw_client_cpu_us_per_call", "raw_server_cpu_us_per_call",
        "raw_echo_1mib_p50_us", "raw_unix_call_p50_us", "raw_unix_fanout8_p50_us", "raw_unix_client_cpu_us_per_call",
        "raw_unix_server_cpu_us_per_call", "raw_unix_echo_1mib_p50_us")


def run_in(checkout: str, code: str, *args: str, env_extra: dict[str, str] | None = None) -> Any:
    """Run ``code`` with ``checkout``'s procmesh on the path (and ``env_extra`` in its
    environment); the last JSON line it printed."""
    root = os.path.abspath(checkout)
    env = dict(os.environ, **(env_extra or {}), PYTHONPATH=os.pathsep.join([root, os.path.join(root, "operator")]))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300, cwd=root)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"the run on {checkout} printed no figures (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


def summarize(results: dict[str, list[dict[str, float]]], keys: Sequence[str],
              higher_is_better: Sequence[str] = ()) -> dict[str, dict[str, dict[str, float]]]:
    """Per checkout and figure, the median of the runs and the best run (the highest where more
    is better, else the lowest)."""
    return {
        checkout: {
            key: {"median": statistics.median(r[key] for r in runs),
                  "best": (max if key in higher_is_better else min)(r[key] for r in runs)}
            for key in keys
        }
        for checkout, runs in results.items()
    }


def one_run(checkout: str, env_extra: dict[str, str] | None = None) -> dict[str, float]:
    figures: dict[str, float] = run_in(checkout, f"RAW = {RAW!r}\nFLOOR = {FLOOR!r}\n" + WORKLOAD, env_extra=env_extra)
    return figures


def parse_arm(arm: str) -> tuple[str, dict[str, str]]:
    """``PATH`` or ``PATH@K=V,K2=V2``: the checkout and the environment its runs get."""
    path, _, pairs = arm.partition("@")
    env: dict[str, str] = {}
    for pair in filter(None, pairs.split(",")):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"arm {arm!r}: {pair!r} is not K=V (write PATH@K=V,K2=V2)")
        env[key] = value
    return path, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="checkout A (e.g. a git archive of main), as PATH[@K=V,...]")
    parser.add_argument("candidates", nargs="+", help="checkout B (and more), as PATH[@K=V,...]")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    arms = [args.baseline, *args.candidates]
    parsed = {arm: parse_arm(arm) for arm in arms}
    results: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    for _ in range(args.runs):
        for arm in arms:
            path, env = parsed[arm]
            results[arm].append(one_run(path, env))
    summary = summarize(results, KEYS, higher_is_better=("pipelined_calls_per_s",))
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'metric':31} {'checkout':30} {'median':>9} {'best':>9}")
    for key in KEYS:
        for checkout in results:
            row = summary[checkout][key]
            print(f"{key:31} {checkout[-30:]:30} {row['median']:9.1f} {row['best']:9.1f}")
    for checkout in results:  # each checkout's figures over the floors of its own runs
        med = {key: summary[checkout][key]["median"] for key in KEYS}
        print(f"{checkout[-30:]}: call_one p50 / raw TCP {med['call_one_p50_us'] / med['raw_call_p50_us']:.2f}x, "
              f"/ raw unix {med['call_one_p50_us'] / med['raw_unix_call_p50_us']:.2f}x; 1 MiB echo p50 / raw TCP "
              f"{med['echo_1mib_p50_us'] / med['raw_echo_1mib_p50_us']:.2f}x, / raw unix "
              f"{med['echo_1mib_p50_us'] / med['raw_unix_echo_1mib_p50_us']:.2f}x")


if __name__ == "__main__":
    main()
