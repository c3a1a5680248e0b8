"""Benchmark: big local meshes from one controller, flat loop vs tree fan-out, beside torchmonarch 0.7.

Per size of ``--sizes`` (local procs, zygote-forked for procmesh), each in a worker process of
its own (procs torn down in ``finally``, the worker under ``--timeout``):

1. ``spawn_procs`` and the first ``call()`` to an actor on every proc;
2. memory: USS and RSS of every proc (``/proc/<pid>/smaps_rollup``), per proc;
3. ``call()`` of a no-op endpoint (fan-out) and of one returning its rank (gather of one small
   value from every proc), p50/p99; procmesh in alternating rounds of the flat loop and the
   tree (two actor meshes on the same procs, one spawned under each ``options.tree_fanout_min``:
   a mesh's route is fixed at its spawn), so load hits both alike;
4. torchmonarch: the same steps, only at sizes whose projected memory (its USS per proc,
   measured at the smallest size, times the size, times 1.5) fits in half of MemAvailable; the
   output says where it stopped and why.

The plot (``--plot``) shows fan-out p50 against procs for ours flat, ours tree and torchmonarch;
the JSON carries the crossover (the smallest measured size from which the tree is at least 10 %
faster at every larger size) and a linear fit of each curve (``p50 = a + b * procs``, and of
the CPU per call), the model for projecting 1,024 procs.

    python benchmarks/fanout.py [--sizes 16,32,64,256,512] [--samples 60] [--branching 16] [--json] [--plot F]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

MB = 1024 * 1024
CROSSOVER_MARGIN = 0.9  # the tree "wins" at a size when its p50 is under 90 % of the flat loop's
MONARCH_MARGIN = 1.5  # projected memory x this must fit in half of MemAvailable
# torchmonarch's deadlines for starting procs and actors (30 s by default), raised to --timeout.
MONARCH_DEADLINES = ("HYPERACTOR_MESH_PROC_SPAWN_MAX_IDLE", "HYPERACTOR_MESH_ACTOR_SPAWN_MAX_IDLE",
                     "HYPERACTOR_MESH_GET_PROC_STATE_MAX_IDLE", "HYPERACTOR_HOST_SPAWN_READY_TIMEOUT")
MONARCH_USS_PRIOR_MB = 60.0  # torchmonarch 0.7's USS per proc measured at 16 procs on this VM (59 MB)


def pct(samples: Sequence[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


# Memory of a process tree -------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def uss_rss(pid: int) -> tuple[int, int]:
    """(USS, RSS) in bytes: private pages only, and every resident page."""
    uss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("Private_Clean", "Private_Dirty"):
                    uss += int(value.split()[0]) * 1024
                elif key == "Rss":
                    rss = int(value.split()[0]) * 1024
    except OSError:
        pass
    return uss, rss


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (the exited ones count nothing)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return total / tick


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def proc_memory(procs: int) -> dict[str, float]:
    """Mean USS and RSS (MB) over the ``procs`` largest descendants of this process (the proc
    servers; procmesh's zygote and Monarch's helpers are smaller and left out)."""
    sizes = sorted((uss_rss(p) for p in descendants(os.getpid())), reverse=True)[:procs]
    if not sizes:
        return {"uss_mb": 0.0, "rss_mb": 0.0, "counted": 0}
    return {
        "uss_mb": sum(u for u, _ in sizes) / len(sizes) / MB,
        "rss_mb": sum(r for _, r in sizes) / len(sizes) / MB,
        "counted": len(sizes),
    }


# The workload (one size, one API), run in a worker process ---------------------------------


def actor_class(api: Any) -> type:
    class Leaf(api.Actor):
        @api.endpoint
        def noop(self) -> None:
            return None

        @api.endpoint
        def rank(self) -> int:
            return int(api.current_rank().rank)

    return Leaf


def timed(fn: Any, samples: int, cpu: dict[str, float] | None = None, pids: Sequence[int] = ()) -> list[float]:
    """Latency of each of ``samples`` calls of ``fn``; adds to ``cpu`` the controller's CPU
    seconds (all its threads) and the procs' (``pids``) over them."""
    out = []
    procs_before, mine_before = cpu_seconds(pids), time.process_time()
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    if cpu is not None:
        cpu["controller"] = cpu.get("controller", 0.0) + time.process_time() - mine_before
        cpu["procs"] = cpu.get("procs", 0.0) + cpu_seconds(pids) - procs_before
        cpu["calls"] = cpu.get("calls", 0) + samples
    return out


def worker(api_name: str, size: int, samples: int, branching: int, rounds: int) -> dict[str, Any]:
    api = importlib.import_module(api_name)
    ours = api_name == "mesh_client"
    if ours:
        api.options.tree_branching = branching
        api.options.tree_fanout_min = 10**9  # flat until a round says otherwise
    out: dict[str, Any] = {"procs": size}
    t = time.perf_counter()
    procs = api.this_host().spawn_procs(per_host={"procs": size})
    try:
        out["spawn_s"] = time.perf_counter() - t
        actors = procs.spawn("leaf", actor_class(api))
        t = time.perf_counter()
        actors.noop.call().get()
        out["first_call_s"] = time.perf_counter() - t
        out["spawn_first_call_s"] = out["spawn_s"] + out["first_call_s"]
        out["memory"] = proc_memory(size)
        values = list(actors.rank.call().get().values())
        assert values == list(range(size)), "gather returned ranks out of order"
        # An actor mesh's route is fixed at its spawn: the tree rounds use a mesh spawned tree-routed
        # (after the memory figure, which stays one actor per proc).
        by_mode = {"flat": actors}
        if ours:
            api.options.tree_fanout_min = 1
            by_mode["tree"] = procs.spawn("leaf_tree", actor_class(api))
            by_mode["tree"].noop.call().get()
            api.options.tree_fanout_min = 10**9
        modes = ("flat", "tree") if ours else ("flat",)
        collected: dict[str, dict[str, list[float]]] = {m: {"fanout": [], "gather": []} for m in modes}
        cpu: dict[str, dict[str, float]] = {m: {} for m in modes}
        pids = descendants(os.getpid())
        per_round = max(1, samples // rounds)
        for _ in range(rounds):
            for mode in modes:
                mesh = by_mode[mode]
                mesh.noop.call().get()  # warm the path (connections of the tree)
                collected[mode]["fanout"] += timed(lambda mesh=mesh: mesh.noop.call().get(), per_round, cpu[mode], pids)
                collected[mode]["gather"] += timed(lambda mesh=mesh: list(mesh.rank.call().get().values()), per_round)
        if ours:
            assert list(by_mode["tree"].rank.call().get().values()) == values, "tree and flat gathers differ"
        for mode, used in cpu.items():  # CPU per fan-out call: who is busy (the model's inputs)
            out[f"{mode}_controller_cpu_ms"] = used["controller"] / used["calls"] * 1e3
            out[f"{mode}_procs_cpu_ms"] = used["procs"] / used["calls"] * 1e3
        for mode, figs in collected.items():
            for what, lat in figs.items():
                out[f"{mode}_{what}_p50_ms"] = pct(lat, 0.5) * 1e3
                out[f"{mode}_{what}_p99_ms"] = pct(lat, 0.99) * 1e3
                out[f"{mode}_{what}_samples"] = len(lat)
    finally:
        procs.stop().get()
    return out


def run_worker(api_name: str, size: int, args: argparse.Namespace) -> dict[str, Any] | str:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", api_name, "--sizes", str(size),
           "--samples", str(args.samples), "--branching", str(args.branching), "--rounds", str(args.rounds)]
    env = dict(os.environ)
    if api_name.startswith("monarch"):  # its 30 s spawn deadlines are too short for 64+ procs on a loaded 2-core VM
        env.update({name: f"{args.timeout}s" for name in MONARCH_DEADLINES})
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:] if proc.stderr.strip() else [str(proc.returncode)]
        return "failed: " + " | ".join(tail)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Models and the plot -------------------------------------------------------------------------


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x``."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else 0.0, 0.0)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return (my - b * mx, b)


def models(results: dict[str, Any]) -> dict[str, Any]:
    ours = [r for r in results["procmesh"] if isinstance(r, dict)]
    mon = [r for r in results["torchmonarch"] if isinstance(r, dict)]
    out: dict[str, Any] = {}
    for label, rows, key in (("flat", ours, "flat_fanout_p50_ms"), ("tree", ours, "tree_fanout_p50_ms"),
                             ("flat_gather", ours, "flat_gather_p50_ms"), ("tree_gather", ours, "tree_gather_p50_ms"),
                             ("spawn_first_call", ours, "spawn_first_call_s"),
                             ("flat_controller_cpu", ours, "flat_controller_cpu_ms"), ("flat_procs_cpu", ours, "flat_procs_cpu_ms"),
                             ("tree_controller_cpu", ours, "tree_controller_cpu_ms"), ("tree_procs_cpu", ours, "tree_procs_cpu_ms"),
                             ("torchmonarch", mon, "flat_fanout_p50_ms")):
        if rows:
            a, b = linear_fit([r["procs"] for r in rows], [r[key] for r in rows])
            out[label] = {"a": a, "b": b, "at_1024": a + b * 1024, "unit": "s" if key.endswith("_s") else "ms"}
    # The crossover: the smallest size from which the tree's p50 is at least 10 % under the
    # flat loop's at every larger measured size too (one noisy size is no crossover).
    out["crossover_procs"] = None
    for i, row in enumerate(ours):
        if all(r["tree_fanout_p50_ms"] < CROSSOVER_MARGIN * r["flat_fanout_p50_ms"] for r in ours[i:]):
            out["crossover_procs"] = row["procs"]
            break
    return out


def plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = [r for r in results["procmesh"] if isinstance(r, dict)]
    mon = [r for r in results["torchmonarch"] if isinstance(r, dict)]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if ours:
        xs = [r["procs"] for r in ours]
        ax.plot(xs, [r["flat_fanout_p50_ms"] for r in ours], "o-", label="procmesh, flat loop")
        ax.plot(xs, [r["tree_fanout_p50_ms"] for r in ours], "s-", label=f"procmesh, tree (k={results['branching']})")
    if mon:
        ax.plot([r["procs"] for r in mon], [r["flat_fanout_p50_ms"] for r in mon], "^-", label="torchmonarch 0.7")
    ax.set_xlabel("local procs")
    ax.set_ylabel("call() fan-out p50 (ms)")
    cores = results.get("cores")
    ax.set_title("No-op call() to every proc, one controller" + (f", {cores} cores" if cores else ""))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(results: dict[str, Any]) -> str:
    lines = [f"{'procs':>6} {'system':14} {'spawn+1st (s)':>13} {'USS/proc MB':>11} {'RSS/proc MB':>11} "
             f"{'fanout p50/p99 ms':>18} {'gather p50/p99 ms':>18} {'CPU/call ms: controller, procs':>31}"]
    for key, name in (("procmesh", "ours"), ("torchmonarch", "torchmonarch")):
        for row in results[key]:
            if not isinstance(row, dict):
                lines.append(f"{'':>6} {name:14} {row}")
                continue
            mem = row["memory"]
            for mode in ("flat", "tree"):
                if f"{mode}_fanout_p50_ms" not in row:
                    continue
                label = f"{name} {mode}" if name == "ours" else name
                lines.append(
                    f"{row['procs']:>6} {label:14} {row['spawn_first_call_s']:>13.2f} {mem['uss_mb']:>11.1f} {mem['rss_mb']:>11.1f} "
                    f"{row[f'{mode}_fanout_p50_ms']:>8.2f}/{row[f'{mode}_fanout_p99_ms']:<9.2f} "
                    f"{row[f'{mode}_gather_p50_ms']:>8.2f}/{row[f'{mode}_gather_p99_ms']:<9.2f} "
                    f"{row[f'{mode}_controller_cpu_ms']:>14.2f}, {row[f'{mode}_procs_cpu_ms']:<8.2f}"
                )
    lines.extend(f"torchmonarch not run at {n} procs: {why}" for n, why in results["torchmonarch_skipped"].items())
    m = results["models"]
    lines.append(f"crossover (smallest size where the tree is faster): {m.get('crossover_procs')}")
    for label in ("flat", "tree", "torchmonarch", "spawn_first_call", "flat_controller_cpu", "tree_controller_cpu",
                  "flat_procs_cpu", "tree_procs_cpu"):
        if label in m:
            fit = m[label]
            lines.append(f"fit {label}: {fit['a']:.3f} + {fit['b'] * 1000:.3f}/1000 x procs {fit['unit']}; at 1,024: {fit['at_1024']:.2f} {fit['unit']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16,32,64,256,512", help="comma-separated proc counts")
    parser.add_argument("--samples", type=int, default=60, help="samples per latency figure and mode")
    parser.add_argument("--rounds", type=int, default=3, help="alternating flat/tree rounds")
    parser.add_argument("--branching", type=int, default=16, help="k of the tree")
    parser.add_argument("--timeout", type=int, default=420, help="seconds per worker (one size, one system)")
    parser.add_argument("--no-monarch", action="store_true", help="skip torchmonarch")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--plot", help="write the fan-out plot (PNG) here")
    parser.add_argument("--replot", help="read a --json output instead of measuring (for --plot)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        print(json.dumps(worker(args.worker, sizes[0], args.samples, args.branching, args.rounds)))
        return
    if args.replot:
        with open(args.replot) as f:
            results = json.load(f)
        results["models"] = models(results)
    else:
        results = measure(sizes, args)
    if args.plot:
        plot(results, args.plot)
    print(json.dumps(results, indent=2) if args.json else table(results))


def measure(sizes: list[int], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"sizes": sizes, "branching": args.branching, "procmesh": [], "torchmonarch": [],
                               "torchmonarch_skipped": {}, "command": " ".join(sys.argv),
                               "cores": os.cpu_count()}
    have_monarch = importlib.util.find_spec("monarch") is not None and not args.no_monarch
    monarch_uss = MONARCH_USS_PRIOR_MB  # until measured at the smallest size that runs
    for size in sorted(sizes):
        results["procmesh"].append(run_worker("mesh_client", size, args))
        if not have_monarch:
            results["torchmonarch_skipped"][size] = "not installed or --no-monarch"
            continue
        need = monarch_uss * MB * size * MONARCH_MARGIN
        avail = mem_available()
        if need > avail / 2:
            results["torchmonarch_skipped"][size] = (
                f"projected {need / 2**30:.1f} GiB ({monarch_uss:.0f} MB USS/proc x {size} x {MONARCH_MARGIN}) "
                f"> half of MemAvailable ({avail / 2**30:.1f} GiB)")
            continue
        row = run_worker("monarch.actor", size, args)
        results["torchmonarch"].append(row)
        if isinstance(row, dict):
            monarch_uss = row["memory"]["uss_mb"]
    results["models"] = models(results)
    return results


if __name__ == "__main__":
    main()
