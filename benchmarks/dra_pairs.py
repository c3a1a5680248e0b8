"""GPU-sharing pairs through DRA against the pinned baseline, on the local control plane.

A policy and a trainer mesh (``--gpus`` procs each, the trainer colocated) are created together;
the figure is the time until both are Ready and the operator's API requests for the pair, in dra
mode (claims allocated by the kube-scheduler, devices exposed by the process node acting as the
NVIDIA DRA driver) beside pinned mode (the operator places) in the same run, on a cluster with
one node of each kind (emulated GPUs: the control-plane path only, no CUDA).

    python benchmarks/dra_pairs.py                  # table
    python benchmarks/dra_pairs.py --repeat 5 --json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from benchmarks import cluster_env  # noqa: E402


def pair_specs(mode: str, gpus: int) -> tuple[dict[str, Any], dict[str, Any]]:
    per_host = [{"name": "gpus", "size": gpus}]
    if mode == "dra":
        policy = {"mode": "dra", "deviceClassName": "gpu.nvidia.com", "memoryFraction": 0.4}
        trainer = {"mode": "dra", "memoryFraction": 0.5}
    else:
        policy = {"mode": "pinned", "deviceIDs": list(range(gpus)), "memoryFraction": 0.4}
        trainer = {"mode": "pinned", "memoryFraction": 0.5}
    return ({"perHost": per_host, "gpus": policy},
            {"perHost": per_host, "gpus": trainer, "colocateWith": "policy"})


def one_pair(custom: Any, core: Any, namespace: str, mode: str, gpus: int, metrics_port: int) -> dict[str, float]:
    from tests.cluster import testing
    from tests.integration.operator import support

    policy, trainer = pair_specs(mode, gpus)
    before = cluster_env.operator_requests(metrics_port)
    started = time.perf_counter()
    support.create_mesh(custom, namespace, "policy", **policy)
    support.create_mesh(custom, namespace, "trainer", **trainer)
    support.wait_ready(custom, namespace, "policy")
    support.wait_ready(custom, namespace, "trainer")
    elapsed = time.perf_counter() - started
    requests = cluster_env.operator_requests(metrics_port) - before
    for name in ("trainer", "policy"):
        custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes", name)

    def gone() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="procmesh.io/mesh").items
        claims = custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")
        return not pods and not claims["items"]

    testing.wait_for(gone, "the pair's pods and claims gone")
    return {"seconds": elapsed, "requests": float(requests)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gpus", type=int, default=2, help="procs per mesh (emulated GPUs per node)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from kubernetes import client, config

    from tests.cluster import controlplane
    from tests.cluster.process_node.config import NodeConfig
    from tests.integration.operator import support

    cluster = controlplane.Cluster(pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-dra-")))
    cluster.up([NodeConfig("node-0"), NodeConfig("gpu-node", gpus=args.gpus),
                NodeConfig("dra-node", gpus=args.gpus, dra=True)])
    results: dict[str, list[dict[str, float]]] = {"pinned": [], "dra": []}
    try:
        folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-operator-"))
        with support.operator_with_crd(cluster.kubeconfig, folder) as operator:
            api = config.new_client_from_config(str(cluster.kubeconfig))
            custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            for _ in range(args.repeat):
                for mode in ("pinned", "dra"):  # interleaved, so drift hits both alike
                    results[mode].append(one_pair(custom, core, "default", mode, args.gpus,
                                                  operator.metrics_port))
    finally:
        cluster.down()
    summary = {mode: {"median_seconds": statistics.median(r["seconds"] for r in runs),
                      "median_requests": statistics.median(r["requests"] for r in runs), "runs": runs}
               for mode, runs in results.items()}
    if args.json:
        print(json.dumps({"gpus": args.gpus, "repeat": args.repeat, "modes": summary}, indent=2))
        return 0
    print(f"policy + colocated trainer, {args.gpus} procs each, median of {args.repeat}")
    print(f"{'':38} {'dra (ours)':>12} {'pinned (baseline)':>18}")
    print(f"{'seconds until both Ready':38} {summary['dra']['median_seconds']:12.2f} "
          f"{summary['pinned']['median_seconds']:18.2f}")
    print(f"{'operator API requests':38} {summary['dra']['median_requests']:12.0f} "
          f"{summary['pinned']['median_requests']:18.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
