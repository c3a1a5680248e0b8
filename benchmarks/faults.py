"""Fault and attack scenarios, each a named function returning a dict of figures (no assertions):
the one command for all of them.

    python benchmarks/faults.py                               # every scenario, as a table
    python benchmarks/faults.py --scenario flood --json       # one scenario, JSON
    python benchmarks/faults.py --connections 20000           # a smaller flood
    python benchmarks/faults.py --scenario proc-kills --kills 100

Scenarios register themselves in the one registry, :mod:`benchmarks.scenarios`; each section
below owns its scenarios, and the kill scenarios (procs, the operator, a node, the API server on
a local control plane) are :mod:`benchmarks.fault_kills`, imported into the same registry. Every
figure that has a baseline carries it in the same dict, measured in the same run.

Floods (issue 12): 10^5 hostile connections to one local proc server (connect and close,
garbage, an oversized frame header, a wrong token, idle connections held open; see
:mod:`benchmarks.flooding`), once as is and once with the proc server's ``RLIMIT_NOFILE`` at 64.
Figures: the proc server's RSS before, at peak and after, its CPU seconds during the flood, a
legitimate client's call latency (p50, p99) during the flood beside the same client with no
flood, the legitimate calls that failed, and the log lines the proc server wrote. Flood rounds:
the same kinds of connection in rounds (10 x 500 by default), the proc's RSS, live connection
objects and Python heap after each, to tell a leak (growth every round) from a plateau.

A dead member of a mesh-wide call (issue 12, item 4): one proc of four SIGKILLed while every
actor sleeps 60 s; time from the kill to ``call()`` raising SupervisionError, beside the time
for a ``call_one()`` to the killed proc itself (which never waited for anyone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import flooding, scenarios  # noqa: E402
from benchmarks.scenarios import scenario  # noqa: E402

MIB = 1 << 20


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


# Floods -------------------------------------------------------------------------------------


def _pinger() -> type:
    from mesh_client import Actor, endpoint

    class Pinger(Actor):
        @endpoint
        def ping(self) -> None:
            return None

        @endpoint
        def pid(self) -> int:
            return os.getpid()

    return Pinger


def _latencies_us(endpoint: Any, count: int, gap: float = 0.002) -> list[float]:
    out = []
    for _ in range(count):
        t = time.perf_counter()
        endpoint.call_one().get(timeout=30)
        out.append((time.perf_counter() - t) * 1e6)
        time.sleep(gap)
    return out


def _count_lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def flood_figures(
    connections: int,
    *,
    nofile: int | None = None,
    hold: int = 300,
    deadline: float = 120.0,
    baseline_calls: int = 1000,
    settle: float = 2.0,
) -> dict[str, Any]:
    """One proc server, a legitimate client on it, and a flood from another process."""
    from mesh_client import this_host

    with tempfile.TemporaryDirectory(prefix="procmesh-flood-") as tmp:
        log = os.path.join(tmp, "proc.stderr")
        command = flooding.proc_command(nofile, log)
        with this_host().spawn_procs(per_host={"procs": 1}, name="flood", bootstrap_command=command) as mesh:
            client = mesh.spawn("pinger", _pinger()).slice(procs=0)
            pid = client.pid.call_one().get(timeout=30)
            port = flooding.listening_port(pid)
            baseline = _latencies_us(client.ping, baseline_calls)
            rss_before = flooding.rss_bytes(pid)
            cpu_before = flooding.cpu_seconds(pid)
            lines_before = _count_lines(log)

            peak = [rss_before]
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.wait(0.02):
                    peak[0] = max(peak[0], flooding.rss_bytes(pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
            flooder = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.flooding", "--port", str(port), "--connections", str(connections),
                 "--hold", str(hold), "--deadline", str(deadline)],
                cwd=ROOT, env=env, stdout=subprocess.PIPE,
            )
            during: list[float] = []
            failed = 0
            while True:  # at least one call, however short the flood
                t = time.perf_counter()
                try:
                    client.ping.call_one().get(timeout=30)
                    during.append((time.perf_counter() - t) * 1e6)
                except Exception:
                    failed += 1
                if flooder.poll() is not None:
                    break
                time.sleep(0.002)
            out, _ = flooder.communicate(timeout=30)
            flood = json.loads(out or b"{}")
            cpu_during = flooding.cpu_seconds(pid) - cpu_before
            time.sleep(settle)  # the proc sees the flooder's last connections close
            sampling.set()
            sampler.join()
            after = _latencies_us(client.ping, 100)
            rss_after = flooding.rss_bytes(pid)
            lines = _count_lines(log) - lines_before
            with open(log, "rb") as f:
                log_tail = f.read().decode("utf-8", "replace").splitlines()[-3:]
    return {
        "connections_attempted": flood.get("attempted", 0),
        "connections_made": sum(flood.get(k, 0) for k in flooding.KINDS),
        "connect_failures": flood.get("connect-failed", 0) + flood.get("connect-timeout", 0),
        "flood_seconds": round(flood.get("seconds", 0.0), 2),
        "nofile": nofile,
        "rss_before_mib": round(rss_before / MIB, 1),
        "rss_peak_mib": round(peak[0] / MIB, 1),
        "rss_after_mib": round(rss_after / MIB, 1),
        "cpu_seconds": round(cpu_during, 2),
        "legit_calls_during": len(during),
        "legit_calls_failed": failed,
        "legit_p50_us": round(pct(during, 0.5)),
        "legit_p99_us": round(pct(during, 0.99)),
        "legit_after_p50_us": round(pct(after, 0.5)),
        "baseline_p50_us": round(pct(baseline, 0.5)),
        "baseline_p99_us": round(pct(baseline, 0.99)),
        "log_lines": lines,
        "log_tail": log_tail,
    }


@scenario("flood", "10^5 hostile connections to one proc server (scale with --connections)")
def flood_scenario(ctx: scenarios.Context) -> dict[str, Any]:
    return flood_figures(ctx.args.connections, deadline=ctx.args.deadline)


@scenario("flood-nofile64", "the same flood with the proc server's RLIMIT_NOFILE at 64 and 100 idle connections held")
def flood_nofile_scenario(ctx: scenarios.Context) -> dict[str, Any]:
    return flood_figures(ctx.args.connections, nofile=64, hold=100, deadline=ctx.args.deadline)


def _inspector() -> type:
    from mesh_client import Actor, endpoint

    class Inspector(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

        @endpoint
        def live(self) -> dict[str, int]:
            """After a full collection: connection objects still alive in the proc (its own
            caller's included), and the interpreter's allocated blocks (Python's heap)."""
            import gc

            from mesh_client._src.runtime import channel

            gc.collect()
            channels = sum(1 for o in gc.get_objects() if isinstance(o, channel.Channel))
            return {"channels": channels, "python_blocks": sys.getallocatedblocks()}

    return Inspector


def flood_rounds_figures(rounds: int, per_round: int, *, hold: int = 300, settle_limit: float = 60.0) -> dict[str, Any]:
    """Rounds of hostile connections to one proc server; after each, once the proc has
    accepted and closed them all: its RSS, descriptors, live connection objects and Python heap.
    A leak grows with every round; an allocator's high-water mark stops growing."""
    from mesh_client import this_host

    with tempfile.TemporaryDirectory(prefix="procmesh-rounds-") as tmp:
        command = flooding.proc_command(None, os.path.join(tmp, "proc.stderr"))
        with this_host().spawn_procs(per_host={"procs": 1}, name="rounds", bootstrap_command=command) as mesh:
            inspector = mesh.spawn("inspector", _inspector()).slice(procs=0)
            pid = inspector.pid.call_one().get(timeout=30)
            port = flooding.listening_port(pid)
            descriptors = flooding.open_descriptors(pid)
            rows: list[dict[str, Any]] = []

            def measure(made: int) -> None:
                live = inspector.live.call_one().get(timeout=60)
                rows.append({"connections": made, "rss_kib": flooding.rss_bytes(pid) >> 10,
                             "descriptors": flooding.open_descriptors(pid), **live})

            measure(0)
            for _ in range(rounds):
                flood = flooding.flood(port, per_round, hold=hold, deadline=settle_limit)
                deadline = time.monotonic() + settle_limit
                # Taken from the backlog and closed: a proc that has accepted none holds no more
                # descriptors than before either.
                while (flooding.accept_backlog(pid, port) or flooding.open_descriptors(pid) > descriptors) \
                        and time.monotonic() < deadline:
                    time.sleep(0.02)
                measure(sum(flood.get(k, 0) for k in flooding.KINDS))
    rss = [row["rss_kib"] for row in rows]
    half = rounds // 2
    return {
        "rounds": rounds,
        "connections_per_round": per_round,
        "connections_made": sum(row["connections"] for row in rows),
        "rss_before_kib": rss[0],
        "rss_after_first_kib": rss[1] if rounds else rss[0],
        "rss_after_last_kib": rss[-1],
        "rss_growth_last_half_kib": rss[-1] - rss[half],
        "live_channels_before": rows[0]["channels"],
        "live_channels_after_last": rows[-1]["channels"],
        "python_blocks_before": rows[0]["python_blocks"],
        "python_blocks_after_first": rows[1]["python_blocks"] if rounds else rows[0]["python_blocks"],
        "python_blocks_after_last": rows[-1]["python_blocks"],
        "per_round": rows,
    }


@scenario("flood-rounds", "rounds of hostile connections to one proc server: its memory after each (--flood-rounds, --round-connections)")
def flood_rounds_scenario(ctx: scenarios.Context) -> dict[str, Any]:
    return flood_rounds_figures(ctx.args.flood_rounds, ctx.args.round_connections)


# A dead member of a mesh-wide call ------------------------------------------------------------


def _sleeper() -> type:
    from mesh_client import Actor, endpoint

    class Sleeper(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

        @endpoint
        def sleep(self, seconds: float) -> None:
            time.sleep(seconds)

    return Sleeper


def fail_fast_figures(rounds: int, procs: int = 4, survivor_sleep: float = 60.0) -> dict[str, Any]:
    """SIGKILL one proc of a mesh whose every actor is inside a long call: time from the kill to
    the mesh-wide ``call()`` failing, beside the same for a ``call_one()`` to the killed proc."""
    import signal

    from mesh_client import SupervisionError, this_host

    mesh_ms: list[float] = []
    one_ms: list[float] = []
    wrong = 0
    told = 0  # errors that said how the proc died (known within peers.LOSS_DETAIL_SECONDS)
    for r in range(rounds):
        with this_host().spawn_procs(per_host={"procs": procs}, name=f"ff{r}") as mesh:
            actors = mesh.spawn("sleeper", _sleeper())
            pids = list(actors.pid.call().get(timeout=30).values())
            victim = pids[r % procs]
            whole = actors.sleep.call(survivor_sleep)
            alone = actors.slice(procs=r % procs).sleep.call_one(survivor_sleep)
            time.sleep(0.05)  # every actor is inside sleep()
            killed = time.perf_counter()
            os.kill(victim, signal.SIGKILL)
            for fut, out in ((whole, mesh_ms), (alone, one_ms)):
                try:
                    fut.get(timeout=survivor_sleep / 2)
                    wrong += 1
                except SupervisionError as e:
                    out.append((time.perf_counter() - killed) * 1e3)
                    told += "killed by SIGKILL" in str(e)
                except TimeoutError:
                    wrong += 1
            for pid in pids:  # do not wait for the survivors' sleep on the way out
                if pid != victim:
                    os.kill(pid, signal.SIGKILL)
    return {
        "rounds": rounds,
        "call_error_p50_ms": round(pct(mesh_ms, 0.5), 2),
        "call_error_p90_ms": round(pct(mesh_ms, 0.9), 2),
        "call_error_max_ms": round(max(mesh_ms, default=float("nan")), 2),
        "call_one_error_p50_ms": round(pct(one_ms, 0.5), 2),
        "call_one_error_max_ms": round(max(one_ms, default=float("nan")), 2),
        "not_supervision_error": wrong,
        "errors_saying_how_it_died": told,
    }


@scenario("call-fail-fast", "SIGKILL one of 4 procs while all are busy: time until call() fails")
def fail_fast_scenario(ctx: scenarios.Context) -> dict[str, Any]:
    return fail_fast_figures(ctx.args.rounds)


# Kills (procs, the operator, a node, the API server): their own module, this registry --------

from benchmarks import fault_kills, link_breaks  # noqa: E402, F401  (their scenarios come after the ones above)

# Output -------------------------------------------------------------------------------------

TARGETS = {
    "rss_peak_mib": "<= before + 64",
    "rss_after_mib": "<= before + 64",
    "live_channels_after_last": "= before",
    "legit_p99_us": "<= 10000",
    "legit_calls_failed": "0",
    "call_error_max_ms": "<= 100",
    "not_supervision_error": "0",
    "stuck": "0",
    "duplicates": "0",
    "orphans": "0",
    "RestartProc.back_to_ready_s.p99": "<= 5",
    "RestartMesh.back_to_ready_s.p99": "<= 5",
}


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def table(results: dict[str, dict[str, Any]]) -> str:
    """One section per scenario, one line per (flattened) figure, with its target if any."""
    lines = []
    for name, figures in results.items():
        lines.append(f"## {name}")
        for key, value in scenarios.flatten(figures):
            target = TARGETS.get(key) or TARGETS.get(key.rsplit(".", 1)[-1])
            lines.append(f"  {key:<58} {_fmt(value):>14}" + (f"  target {target}" if target else ""))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", action="append", choices=list(scenarios.SCENARIOS),
                   help="run only these (repeatable; default all, in this order)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    floods = p.add_argument_group("floods and fail-fast")
    floods.add_argument("--connections", type=int, default=100_000, help="hostile connections per flood")
    floods.add_argument("--deadline", type=float, default=60.0, help="seconds a flood may last at most")
    floods.add_argument("--rounds", type=int, default=20, help="kills for call-fail-fast")
    floods.add_argument("--flood-rounds", type=int, default=10, help="rounds of flood-rounds")
    floods.add_argument("--round-connections", type=int, default=500, help="hostile connections per round of flood-rounds")
    kills = p.add_argument_group("kills (one local control plane for all of them)")
    kills.add_argument("--kills", type=int, default=10, help="proc kills per restart policy")
    kills.add_argument("--caller-kills", type=int, default=5,
                       help="of those, how many measure the caller's error (attach + pending call)")
    kills.add_argument("--baseline-kills", type=int, default=10,
                       help="kills of the kubelet baseline (each waits out CrashLoopBackOff)")
    kills.add_argument("--operator-kills", type=int, default=3)
    kills.add_argument("--procs", type=int, default=64, help="mesh size for operator-kills")
    kills.add_argument("--node-kills", type=int, default=1)
    kills.add_argument("--silences", type=int, default=1,
                       help="node-silences rounds (each about a minute and a half)")
    kills.add_argument("--failovers", type=int, default=1,
                       help="leader-failovers rounds per way and signal (a kill of a peering "
                            "replica waits out kopf's peering lifetime, about a minute)")
    kills.add_argument("--apiserver-restarts", type=int, default=3)
    kills.add_argument("--stuck-after", type=float, default=60.0,
                       help="a proc-kill restart not back by then counts as stuck")
    kills.add_argument("--seed", type=int, default=12)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        ctx = scenarios.Context(args, stack, open_cluster=fault_kills.environment)
        for name in args.scenario or list(scenarios.SCENARIOS):
            print(f"running {name} ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            try:
                results[name] = scenarios.SCENARIOS[name].run(ctx)
            except Exception as e:  # noqa: BLE001 - report it, run the other scenarios
                results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
            results[name]["wall_s"] = round(time.monotonic() - started, 1)
            print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1) if args.json else table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
