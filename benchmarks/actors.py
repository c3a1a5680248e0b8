"""Actor-call benchmark: procmesh beside raw pickle-over-TCP and -unix baselines and torchmonarch 0.7.

One run, one machine: the same workload (a no-op and an echo endpoint on local procs) through
procmesh, through Monarch's identical API when ``torchmonarch`` is installed (the ``bench``
extra; skipped with a note otherwise), and the smallest possible socket round trip over each
transport procmesh uses: TCP (pods, other hosts) and AF_UNIX (local procs, runtime/unixlinks.py).

    python benchmarks/actors.py            # table
    python benchmarks/actors.py --json     # JSON
    python benchmarks/actors.py --breakdown   # where a call_one's time goes, stage by stage
    python benchmarks/actors.py --large       # where a 1 MiB echo's time goes; bytes, bytearray, numpy, torch
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import pickle
import socket
import statistics
import struct
import subprocess
import sys
import time
from typing import Any

# Targets from the issue, relative to the same run where they name a baseline.
# Issue 14's targets.
TARGETS = {
    "call_one_p50_us": "<= 1.5x raw round trip",
    "pipelined_calls_per_s": ">= 100000",
    "fanout8_p50_us": "<= 250",
    "echo_1mib_p50_us": "<= 600",
    "spawn8_first_call_s": "keep (0.044 s)",
}

MIB = 1 << 20


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


# The workload, written once against the Monarch API; run with mesh_client or monarch.actor.


def echo_class(actor_api: Any) -> type:
    class Echo(actor_api.Actor):
        @actor_api.endpoint
        def noop(self) -> None:
            return None

        @actor_api.endpoint
        def echo(self, value: bytes) -> bytes:
            return value

    return Echo


def spawn_figure(actor_api: Any, hosts: Any) -> float:
    """Median of 3: spawn 8 procs, an actor on each, and the first call to all of them."""
    Echo = echo_class(actor_api)
    spawns = []
    for _ in range(3):
        started = time.perf_counter()
        procs = hosts.spawn_procs(per_host={"gpus": 8})
        procs.spawn("echo", Echo).noop.call().get()
        spawns.append(time.perf_counter() - started)
        procs.stop().get()
    return sorted(spawns)[1]


def call_figures(actors: Any, calls: int) -> dict[str, float]:
    """Latency, throughput, fan-out and 1 MiB echo on an 8-actor mesh."""
    out: dict[str, float] = {}
    one = actors.slice(gpus=0)
    for _ in range(200):
        one.noop.call_one().get()
    lat = []
    for _ in range(calls):
        t = time.perf_counter()
        one.noop.call_one().get()
        lat.append(time.perf_counter() - t)
    out["call_one_p50_us"] = pct(lat, 0.5) * 1e6
    out["call_one_p99_us"] = pct(lat, 0.99) * 1e6

    n = calls * 5
    t = time.perf_counter()
    futures = [one.noop.call_one() for _ in range(n)]
    for f in futures:
        f.get()
    out["pipelined_calls_per_s"] = n / (time.perf_counter() - t)

    lat = []
    for _ in range(max(100, calls // 4)):
        t = time.perf_counter()
        actors.noop.call().get()
        lat.append(time.perf_counter() - t)
    out["fanout8_p50_us"] = pct(lat, 0.5) * 1e6

    blob = os.urandom(MIB)
    lat = []
    for _ in range(max(50, calls // 20)):
        t = time.perf_counter()
        back = one.echo.call_one(blob).get()
        lat.append(time.perf_counter() - t)
    assert back == blob
    out["echo_1mib_p50_us"] = pct(lat, 0.5) * 1e6
    return out


def workload(api: str, calls: int) -> dict[str, float]:
    """Every figure for one API, on local procs."""
    actor_api = importlib.import_module(api)
    hosts = actor_api.this_host()
    out = {"spawn8_first_call_s": spawn_figure(actor_api, hosts)}
    procs = hosts.spawn_procs(per_host={"gpus": 8})
    out.update(call_figures(procs.spawn("echo", echo_class(actor_api)), calls))
    procs.stop().get()
    return out


# The baseline: length-prefixed pickles over one connection to a plain echo process, over TCP
# (``python -c ECHO_SERVER``: it prints its port) or over AF_UNIX (``python -c ECHO_SERVER unix
# PATH``: it prints "ready" once it listens at PATH), the two transports procmesh uses locally.

# A message "cpu" is answered with the server's CPU time (benchmarks/call_ab.py's floor asks it).
# How a raw server listens (TCP, or AF_UNIX at ``unix PATH``) and takes its one connection: the
# start of ECHO_SERVER here and of large_stages.FLOOR_BODY's server, both started by start_server.
SERVER_PRELUDE = r"""
import pickle, socket, struct, sys, time
if sys.argv[1:2] == ["unix"]:
    srv = socket.socket(socket.AF_UNIX); srv.bind(sys.argv[2]); srv.listen(1)
    print("ready", flush=True)
else:
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
if conn.family != socket.AF_UNIX: conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
"""

# Exactly n bytes from the connection (the client's close ends the server): for the servers below.
RECV_EXACT = r"""
def recv(n):
    buf = bytearray(n); view = memoryview(buf); got = 0
    while got < n:
        k = conn.recv_into(view[got:])
        if not k: sys.exit(0)
        got += k
    return buf
"""

ECHO_SERVER = SERVER_PRELUDE + RECV_EXACT + r"""
while True:
    (n,) = struct.unpack("!Q", recv(8))
    msg = pickle.loads(recv(n))
    if msg == "cpu": msg = time.process_time()
    data = pickle.dumps(msg, protocol=5)
    conn.sendall(struct.pack("!Q", len(data)) + data)
"""

TRANSPORTS = ("tcp", "unix")


def echo_server(transport: str, workdir: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start ECHO_SERVER over ``transport`` ("tcp" or "unix", its socket in ``workdir``) and connect."""
    return start_server(ECHO_SERVER, transport, workdir)


def start_server(code: str, transport: str, workdir: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start a raw server (``code`` begins with SERVER_PRELUDE) over ``transport`` and connect."""
    if transport == "unix":
        path = os.path.join(workdir, f"echo-{len(os.listdir(workdir))}")
        server = subprocess.Popen([sys.executable, "-c", code, "unix", path], stdout=subprocess.PIPE)
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return server, sock
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert server.stdout is not None
    sock = socket.create_connection(("127.0.0.1", int(server.stdout.readline())))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return server, sock


def raw_baseline(calls: int, transport: str = "tcp") -> dict[str, float]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pm-raw-") as workdir:
        server, sock = echo_server(transport, workdir)
        try:
            return _raw_figures(sock, calls)
        finally:
            sock.close()
            server.kill()
            server.wait()


def _raw_figures(sock: socket.socket, calls: int) -> dict[str, float]:
    def roundtrip(obj: object) -> object:
        data = pickle.dumps(obj, protocol=5)
        sock.sendall(struct.pack("!Q", len(data)) + data)
        head = b""
        while len(head) < 8:
            head += sock.recv(8 - len(head))
        (n,) = struct.unpack("!Q", head)
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            got += sock.recv_into(view[got:])
        return pickle.loads(buf)

    for _ in range(200):
        roundtrip(("noop", (), {}))
    lat = []
    for _ in range(calls):
        t = time.perf_counter()
        roundtrip(("noop", (), {}))
        lat.append(time.perf_counter() - t)
    blob = os.urandom(MIB)
    big = []
    for _ in range(max(50, calls // 20)):
        t = time.perf_counter()
        roundtrip(("echo", (blob,), {}))
        big.append(time.perf_counter() - t)
    return {
        "call_one_p50_us": pct(lat, 0.5) * 1e6,
        "call_one_p99_us": pct(lat, 0.99) * 1e6,
        "echo_1mib_p50_us": pct(big, 0.5) * 1e6,
    }


def monarch_in_subprocess(calls: int) -> dict[str, float] | str:
    if importlib.util.find_spec("monarch") is None:
        return "torchmonarch not installed (pip install 'procmesh[bench]'); skipped"
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", "monarch.actor", "--calls", str(calls)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return f"torchmonarch run failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kubernetes_figures(calls: int, kubeconfig: str | None, rounds: int = 3) -> dict[str, Any]:
    """The same figures with procs as pods (process node, operator), and attach of 16 procs.

    The call figures alternate between an 8-proc ProcMesh and 8 local exec'd procs, with the
    same control plane running beside both, ``rounds`` times each; medians are reported. That is
    the fair comparison on a 2-core machine, where the control plane itself takes CPU.
    """
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import mesh_client
    from benchmarks import cluster_env
    from mesh_client.kubernetes import KubernetesHostMesh, attach

    with cluster_env.cluster_with_operator(kubeconfig) as (config, _):
        hosts = KubernetesHostMesh(hosts=1, namespace="default", kubeconfig=config)
        out: dict[str, Any] = {"spawn8_first_call_s": spawn_figure(mesh_client, hosts)}
        big = hosts.spawn_procs(per_host={"procs": 16}, name="attach16")  # Ready when it returns
        times = []
        for _ in range(5):
            started = time.perf_counter()
            mesh = attach("attach16", "default", kubeconfig=config, progress=False)
            times.append(time.perf_counter() - started)
            mesh.stop().get()  # disconnects only
        out["attach16_s"] = sorted(times)[len(times) // 2]
        big.stop().get()

        Echo = echo_class(mesh_client)
        pods = hosts.spawn_procs(per_host={"gpus": 8}, name="calls")
        # Pods exec the proc server; so do these local procs (forked ones share the zygote's
        # pages and fan out ~20% faster, which would be a comparison of fork and exec instead).
        local = mesh_client.this_host().spawn_procs(
            per_host={"gpus": 8}, bootstrap_command=mesh_client.default_bootstrap_cmd().with_env({"PYTHONHASHSEED": "0"})
        )
        meshes = {"kubernetes": pods.spawn("echo", Echo), "local": local.spawn("echo", Echo)}
        samples: dict[str, list[dict[str, float]]] = {"kubernetes": [], "local": []}
        for _ in range(rounds):
            for which in ("local", "kubernetes"):
                samples[which].append(call_figures(meshes[which], calls))
        pods.stop().get()
        local.stop().get()
    out["rounds"] = samples
    for which, runs in samples.items():
        medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        if which == "kubernetes":
            out.update(medians)
        else:
            out["local_beside_cluster"] = medians
    return out


def run(calls: int, with_monarch: bool, with_kubernetes: bool, kubeconfig: str | None = None, rounds: int = 5) -> dict[str, object]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import large_stages

    echoes = max(50, calls // 20)
    results: dict[str, object] = {"raw_tcp": raw_baseline(calls), "raw_unix": raw_baseline(calls, "unix"),
                                  "copy_free_tcp": large_stages.raw_floor(echoes),
                                  "copy_free_unix": large_stages.raw_floor(echoes, "unix"),
                                  "procmesh": workload("mesh_client", calls)}
    results["torchmonarch"] = monarch_in_subprocess(calls) if with_monarch else "skipped (--no-monarch)"
    if with_kubernetes:
        results["procmesh_kubernetes"] = kubernetes_figures(calls, kubeconfig, rounds)
    results["targets"] = TARGETS
    return results


def table(results: dict[str, object]) -> str:
    ours = results["procmesh"]
    raw = results["raw_tcp"]
    raw_unix = results["raw_unix"]
    mon = results["torchmonarch"]
    kube = results.get("procmesh_kubernetes")
    assert isinstance(ours, dict) and isinstance(raw, dict) and isinstance(raw_unix, dict)
    rows = [
        ("call_one p50 (us)", "call_one_p50_us", "{:.0f}"),
        ("call_one p99 (us)", "call_one_p99_us", "{:.0f}"),
        ("pipelined calls/s", "pipelined_calls_per_s", "{:.0f}"),
        ("call() fan-out to 8 p50 (us)", "fanout8_p50_us", "{:.0f}"),
        ("1 MiB echo p50 (us; raw: pickled)", "echo_1mib_p50_us", "{:.0f}"),
        ("spawn 8 procs + first call (s)", "spawn8_first_call_s", "{:.3f}"),
    ]
    lines = [f"{'metric':32} {'procmesh':>10} {'raw TCP':>10} {'raw unix':>10} {'monarch':>10} {'k8s pods':>10}  target"]
    for label, key, fmt in rows + [("attach to a Ready 16-proc mesh (s)", "attach16_s", "{:.3f}")]:
        cells = [fmt.format(d[key]) if isinstance(d, dict) and key in d else "-" for d in (ours, raw, raw_unix, mon, kube)]
        lines.append(f"{label:32} {cells[0]:>10} {cells[1]:>10} {cells[2]:>10} {cells[3]:>10} {cells[4]:>10}"
                     f"  {TARGETS.get(key, '')}")
    free_tcp, free_unix = results.get("copy_free_tcp"), results.get("copy_free_unix")
    if isinstance(free_tcp, dict) and isinstance(free_unix, dict):
        lines.append(f"{'1 MiB echo, copy-free floor (us)':32} {'':>10} {free_tcp['echo_1mib_p50_us']:10.0f}"
                     f" {free_unix['echo_1mib_p50_us']:10.0f}")
    for name, floor, free in (("raw TCP", raw, free_tcp), ("raw unix (local procs' transport)", raw_unix, free_unix)):
        line = f"call_one p50 / {name} round trip: {ours['call_one_p50_us'] / floor['call_one_p50_us']:.2f}x"
        if isinstance(free, dict):
            line += f"; 1 MiB echo p50 / its copy-free floor: {ours['echo_1mib_p50_us'] / free['echo_1mib_p50_us']:.2f}x"
        lines.append(line)
    if isinstance(mon, dict):
        lines.append(f"torchmonarch call_one p50 / procmesh: {mon['call_one_p50_us'] / ours['call_one_p50_us']:.1f}x")
    else:
        lines.append(f"torchmonarch: {mon}")
    if isinstance(kube, dict):
        keys = ("call_one_p50_us", "pipelined_calls_per_s", "fanout8_p50_us", "echo_1mib_p50_us")

        def worst(base: dict) -> float:
            return max((kube[k] / base[k] if k != "pipelined_calls_per_s" else base[k] / kube[k]) - 1 for k in keys)

        beside = kube["local_beside_cluster"]
        lines.append(
            "local backend (exec'd procs, as in pods) with the control plane running beside it: "
            + ", ".join(f"{k} {beside[k]:.0f}" for k in keys)
        )
        lines.append(f"Kubernetes backend vs local (idle machine), worst call figure: {100 * worst(ours):+.1f}%")
        lines.append(
            f"Kubernetes backend vs local with the control plane running, worst call figure: "
            f"{100 * worst(beside):+.1f}% (target within 10%)"
        )
    return "\n".join(lines)


def breakdown(calls: int) -> dict[str, Any]:
    """The raw round trip, then an instrumented procmesh run (benchmarks/call_stages.py), in one run."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import call_stages

    raw = raw_baseline(calls)
    return {"raw_tcp": raw, "raw_unix": raw_baseline(calls, "unix"), "stages": call_stages.measure(calls),
            "raw_tcp_after": raw_baseline(calls)}


def breakdown_table(results: dict[str, Any]) -> str:
    stages = results["stages"]
    lines = [f"{'stage of one call_one (instrumented run)':44} {'p50 us':>8} {'p99 us':>8}"]
    for name, row in stages.items():
        if name == "total":
            continue
        lines.append(f"{name:44} {row['p50_us']:8.1f} {row['p99_us']:8.1f}")
    total = stages["total"]
    lines.append(f"{'sum of stage p50s':44} {sum(r['p50_us'] for k, r in stages.items() if k != 'total'):8.1f}")
    lines.append(f"{'call_one, end to end (instrumented)':44} {total['p50_us']:8.1f} {total['p99_us']:8.1f}")
    labels = {"raw_tcp": "raw pickle/TCP round trip (before)", "raw_unix": "raw pickle/unix round trip",
              "raw_tcp_after": "raw pickle/TCP round trip (after)"}
    for key, label in labels.items():
        if key in results:
            raw = results[key]
            lines.append(f"{label:44} {raw['call_one_p50_us']:8.1f} {raw['call_one_p99_us']:8.1f}")
    lines.append(f"samples: {total['n']} calls")
    return "\n".join(lines)


def large_breakdown(calls: int) -> dict[str, Any]:
    """The copy-free floor, then instrumented 1 MiB echoes (benchmarks/large_stages.py) of bytes,
    bytearray, numpy and a torch CPU tensor (the last two where installed), then the floor again."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import large_stages

    out: dict[str, Any] = {"floor": large_stages.floors(calls)}
    kinds = ["bytes", "bytearray"] + [k for k in ("numpy", "torch") if importlib.util.find_spec(k)]
    out["stages"] = {kind: large_stages.measure(calls, kind) for kind in kinds}
    missing = [k for k in ("numpy", "torch") if k not in kinds]
    if missing:
        out["note"] = f"{' and '.join(missing)} not installed: skipped"
    out["floor_after"] = large_stages.floors(calls)
    return out


def large_table(results: dict[str, Any]) -> str:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import large_stages

    stages = results["stages"]
    kinds = list(stages)
    tiling = [name for name, _, _ in large_stages.STAGES]

    def row(label: str, name: str, fmt: str = "{:10.1f}") -> str:
        return f"{label:52} " + " ".join(fmt.format(stages[k][name]["p50_us"]) for k in kinds)

    lines = [f"{'stage of one 1 MiB echo (p50 us)':52} " + " ".join(f"{k:>10}" for k in kinds)]
    lines += [row(name, name) for name in tiling]
    lines.append(f"{'sum of the stages above':52} " + " ".join(f"{sum(stages[k][n]['p50_us'] for n in tiling):10.1f}" for k in kinds))
    lines.append(row("echo, end to end (instrumented)", "total"))
    lines.append("inside the transfers (p50; sizes in bytes, reads as counts):")
    lines += [row(name, name) for name in stages[kinds[0]] if name not in tiling and name != "total"]
    for key in ("floor", "floor_after"):
        floor = results[key]
        lines.append(f"{key}: " + ", ".join(f"{k} {v:.1f}" for k, v in floor.items()))
    if "note" in results:
        lines.append(results["note"])
    lines.append(f"samples: {stages[kinds[0]]['total']['n']} echoes per kind")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--calls", type=int, default=4000, help="samples per latency figure")
    parser.add_argument("--no-monarch", action="store_true", help="skip torchmonarch even if installed")
    parser.add_argument("--kubernetes", action="store_true", help="also measure procs as pods (starts the local control plane)")
    parser.add_argument("--kubeconfig", help="with --kubernetes: a running cluster with the CRD, instead of starting one")
    parser.add_argument("--rounds", type=int, default=5, help="with --kubernetes: alternating rounds of call figures")
    parser.add_argument("--breakdown", action="store_true", help="per-stage p50/p99 of call_one (an instrumented run) beside raw TCP")
    parser.add_argument("--large", action="store_true", help="per-stage p50 of a 1 MiB echo (bytes, bytearray, numpy) beside the copy-free floor")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.large:
        results = large_breakdown(args.calls)
        print(json.dumps(results, indent=2) if args.json else large_table(results))
        return
    if args.breakdown:
        results = breakdown(args.calls)
        print(json.dumps(results, indent=2) if args.json else breakdown_table(results))
        return
    if args.worker:
        print(json.dumps(workload(args.worker, args.calls)))
        return
    results = run(args.calls, not args.no_monarch, args.kubernetes, args.kubeconfig, args.rounds)
    print(json.dumps(results, indent=2) if args.json else table(results))


if __name__ == "__main__":
    main()
