"""A/B of the two local transports in one checkout: loopback TCP against AF_UNIX, runs alternating.

The same workload as :mod:`call_ab` (its floors over both transports first, then call_one,
fan-out, CPU per call, pipelined calls and 1 MiB echoes on 8 local procs), in one checkout, with
``PROCMESH_UNIX_LINKS=0`` (every link TCP, as before unix links) and ``=1`` (the default: local
procs over AF_UNIX, runtime/unixlinks.py) in alternating fresh processes, so only the transport
differs and load that comes and goes hits both alike. Each figure is given as the median of the
runs and as the median of the per-pair ratios (unix / TCP), which cancels slow load drifts.

    python benchmarks/transport_ab.py . --runs 10          # table
    python benchmarks/transport_ab.py . --runs 10 --json   # JSON
"""

from __future__ import annotations

import argparse
import json
import statistics

from call_ab import KEYS, one_run

SIDES = {"tcp": {"PROCMESH_UNIX_LINKS": "0"}, "unix": {"PROCMESH_UNIX_LINKS": "1"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", help="the procmesh checkout to measure")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    for _ in range(args.runs):
        for side, env in SIDES.items():
            results[side].append(one_run(args.checkout, env))
    summary = {
        key: {
            "tcp": statistics.median(r[key] for r in results["tcp"]),
            "unix": statistics.median(r[key] for r in results["unix"]),
            "ratio": statistics.median(u[key] / t[key] for t, u in zip(results["tcp"], results["unix"]) if t[key]),
        }
        for key in KEYS
    }
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'metric':31} {'links TCP':>10} {'links unix':>10} {'unix/TCP per pair':>18}")
    for key, row in summary.items():
        print(f"{key:31} {row['tcp']:10.1f} {row['unix']:10.1f} {row['ratio']:18.3f}")
    print("raw_* rows are the floors, measured the same way in both sides' runs (they do not depend on the switch)")


if __name__ == "__main__":
    main()
