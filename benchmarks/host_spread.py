"""Benchmark: the gate's gang fit check with hosts on distinct nodes, beside the same check
without (``spec.placement.hosts: Any``, the baseline).

Pure and in-process (no cluster): renders every pod of a ``hosts x 8`` none-mode mesh with
:func:`procmesh_operator.rendering.render_pod` (so with the pod (anti-)affinity of
:mod:`procmesh_operator.spreading`), then times :func:`procmesh_operator.fitting.fit` on one
empty node per host, the check the operator runs before lifting the scheduling gate (and, in
podgroup mode, to explain a held gang). Median of --repeat runs per size.

    python benchmarks/host_spread.py [--hosts 32 250 1000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from procmesh_operator import fitting, rendering, settings, specs  # noqa: E402

PER_HOST = 8
SETTINGS = settings.Settings()


def gang(hosts: int, placement: str) -> list[dict[str, Any]]:
    mesh = specs.parse({"metadata": {"name": "big", "namespace": "ns", "uid": "u", "generation": 1},
                        "spec": {"hosts": hosts, "perHost": [{"name": "procs", "size": PER_HOST}],
                                 "placement": {"hosts": placement}}})
    pods = []
    for rank in range(mesh.size):
        pod = rendering.render_pod(mesh, rank, rendering.ProcPlacement(), SETTINGS)
        pod["metadata"]["uid"] = f"uid-{rank}"
        pods.append(pod)
    return pods


def nodes(count: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"node-{i:05d}", "labels": {}}, "spec": {},
             "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}]}}
            for i in range(count)]


def seconds(hosts: int, placement: str, repeat: int) -> tuple[float, bool]:
    pods, room = gang(hosts, placement), nodes(hosts)
    times, fits = [], True
    for _ in range(repeat):
        start = time.perf_counter()
        fits = fitting.fit(pods, room, []).fits and fits
        times.append(time.perf_counter() - start)
    return statistics.median(times), fits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[32, 250, 1000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    rows = []
    for hosts in args.hosts:
        spread, spread_fits = seconds(hosts, "DistinctNodes", args.repeat)
        any_, any_fits = seconds(hosts, "Any", args.repeat)
        rows.append({"hosts": hosts, "procs": hosts * PER_HOST, "nodes": hosts,
                     "distinct_nodes_s": spread, "any_s": any_, "fits": spread_fits and any_fits})
    if args.json:
        print(json.dumps({"per_host": PER_HOST, "repeat": args.repeat, "rows": rows}, indent=2))
        return 0
    print(f"gang fit check, hosts x {PER_HOST} procs on one node per host, median of {args.repeat}")
    print(f"{'procs':>7} {'nodes':>6} {'DistinctNodes s':>16} {'Any s (baseline)':>17} {'ratio':>6}")
    for r in rows:
        print(f"{r['procs']:>7} {r['nodes']:>6} {r['distinct_nodes_s']:>16.3f} {r['any_s']:>17.3f} "
              f"{r['distinct_nodes_s'] / r['any_s']:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
