"""Benchmark: a 64-proc plugin-mode ProcMesh from apply to Ready, with and without gang placement.

One control plane of tests/cluster (the PodGroup API served) and one process node with 64 GPU
units (8 emulated GPUs x 8 time-slicing replicas), both started here. Each run starts the
operator (``python -m procmesh_operator``) with one ``--gang`` setting, waits until it is live,
creates one ProcMesh of 64 procs (``gpus.mode: plugin``, one unit each) in a fresh namespace,
and waits on a watch until its Ready condition is True for its generation. Settings:

* ``off``: no gang machinery (pods scheduled one by one): the baseline;
* ``podgroup``: a PodGroup of minCount 64, the kube-scheduler's gang plugin;
* ``gate``: pods created behind the scheduling gate, lifted at once after the operator's fit check.

Runs rotate the order of the settings, --repeat times; the table shows medians, and the
operator's API requests per mesh (its procmesh_api_requests_total).

    python benchmarks/gang.py [--procs 64] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from kubernetes import client, config  # noqa: E402

from benchmarks import cluster_env  # noqa: E402
from tests.cluster import controlplane  # noqa: E402
from tests.cluster.process_node.config import NodeConfig  # noqa: E402
from tests.integration.operator import support  # noqa: E402

SETTINGS = ("off", "podgroup", "gate")


def run_once(custom: Any, namespace: str, procs: int, metrics_port: int) -> dict[str, Any]:
    return cluster_env.time_until_ready(custom, namespace, {"hosts": 1, "perHost": [{"name": "gpus", "size": procs}], "gpus": {"mode": "plugin"}}, metrics_port)


def fresh_namespace(core: Any, prefix: str) -> str:
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    for _ in range(600):  # pods need the namespace's default service account
        try:
            core.read_namespaced_service_account("default", namespace)
            return namespace
        except client.ApiException:
            time.sleep(0.1)
    raise RuntimeError(f"namespace {namespace} got no default service account in 60 s")


def wait_gone(core: Any, namespace: str) -> None:
    for _ in range(1200):
        if not core.list_namespaced_pod(namespace).items:
            return
        time.sleep(0.2)
    raise RuntimeError(f"pods of namespace {namespace} still there after 240 s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--procs", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)

    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SETTINGS}
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-gang-"))
    cluster = controlplane.Cluster(folder / "cluster")
    replicas = max(1, -(-args.procs // 8))
    cluster.up([NodeConfig("gpu-0", pods=max(110, args.procs + 20), gpus=8,
                           gpu_replicas=replicas)])
    try:
        support.install_crd(cluster.kubeconfig)
        api = config.new_client_from_config(str(cluster.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        for i in range(args.repeat):
            order = SETTINGS[i % 3:] + SETTINGS[:i % 3]
            for setting in order:
                operator = support.OperatorProcess(cluster.kubeconfig, folder)
                operator.start("--gang", setting)
                try:
                    namespace = fresh_namespace(core, f"bench-{setting}")
                    results[setting].append(run_once(custom, namespace, args.procs,
                                                     operator.metrics_port))
                    core.delete_namespace(namespace)
                    wait_gone(core, namespace)
                finally:
                    operator.stop()
    finally:
        cluster.down()

    medians = {s: statistics.median(r["seconds"] for r in results[s]) for s in SETTINGS}
    report = {
        "procs": args.procs, "repeat": args.repeat, "gpu_units": 8 * replicas,
        **{f"{s}_seconds": [round(r["seconds"], 3) for r in results[s]] for s in SETTINGS},
        **{f"{s}_median_seconds": round(medians[s], 3) for s in SETTINGS},
        **{f"{s}_requests_per_mesh": [r["requests"] for r in results[s]] for s in SETTINGS},
        "podgroup_ratio": round(medians["podgroup"] / medians["off"], 3),
        "gate_ratio": round(medians["gate"] / medians["off"], 3),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.procs}-proc plugin mesh on {8 * replicas} GPU units, apply -> Ready, "
          f"median of {args.repeat} (rotating order)")
    print(f"{'--gang':28}{'seconds':>10}{'vs off':>10}{'API requests':>16}")
    for s in SETTINGS:
        requests = statistics.median(r["requests"] for r in results[s])
        print(f"{s:28}{medians[s]:>10.2f}{medians[s] / medians['off']:>10.2f}{requests:>16.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
