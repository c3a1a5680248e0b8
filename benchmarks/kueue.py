"""Benchmark: admission latency of 100 queued ProcMeshes under Kueue, beside the same meshes unqueued.

One control plane of tests/cluster (the PodGroup API served), one process node, Kueue's real
controller manager (tests/cluster/kueue) and the operator (``python -m procmesh_operator``),
all started here. Each round creates ``--meshes`` one-proc ProcMeshes, back to back, in a
fresh namespace, and records when a watch first sees each mesh's pod:

* ``plain``: the meshes have no queue label (the baseline: the operator creates pods at once);
* ``kueue``: each mesh is labelled ``kueue.x-k8s.io/queue-name`` for a LocalQueue whose
  ClusterQueue has quota for all of them: the operator creates a Workload, Kueue admits it,
  the operator sees the admission and only then creates the pod. Also recorded: when the
  mesh's ``Admitted`` condition turns True.

Latency = from the create call's return to the event. The pods select a node label that no node
has, so they stay Pending and no proc server starts: this measures queueing and admission, not
2 cores starting 100 Python processes. Rounds alternate the order, --repeat times.

    python benchmarks/kueue.py [--meshes 100] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from kubernetes import client, config, watch  # noqa: E402

from benchmarks.gang import fresh_namespace, wait_gone  # noqa: E402
from mesh_client._src import contract  # noqa: E402
from procmesh_operator import workloads  # noqa: E402
from tests.cluster import controlplane  # noqa: E402
from tests.cluster.kueue import configs, manager  # noqa: E402
from tests.cluster.process_node.config import NodeConfig  # noqa: E402
from tests.integration.operator import support  # noqa: E402

SETTINGS = ("plain", "kueue")
NOWHERE = {"procmesh.io/bench-no-such-node": "x"}


def _watch(stream: Any, seen: dict[str, float], key: Any, want: int, stop: threading.Event,
           *args: Any) -> None:
    """Record the first time each name (``key(obj)``, None to skip) is seen, until ``want``."""
    w = watch.Watch()
    for event in w.stream(stream, *args, timeout_seconds=600):
        name = key(event["object"])
        if name is not None and name not in seen:
            seen[name] = time.monotonic()
        if len(seen) >= want or stop.is_set():
            w.stop()


def _admitted_name(obj: dict[str, Any]) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == contract.ADMITTED and c["status"] == "True":
            return str(obj["metadata"]["name"])
    return None


def run_round(api: Any, namespace: str, meshes: int, queue: str | None) -> dict[str, Any]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    pods_seen: dict[str, float] = {}
    admitted: dict[str, float] = {}
    stop = threading.Event()
    watchers = [threading.Thread(target=_watch, daemon=True, args=(
        core.list_namespaced_pod, pods_seen,
        lambda p: (p.metadata.labels or {}).get(contract.MESH_LABEL), meshes, stop, namespace))]
    if queue is not None:
        watchers.append(threading.Thread(target=_watch, daemon=True, args=(
            custom.list_namespaced_custom_object, admitted, _admitted_name, meshes, stop,
            contract.GROUP, contract.VERSION, namespace, contract.PLURAL)))
    for t in watchers:
        t.start()
    time.sleep(0.5)  # the watches are open before the first create
    created: dict[str, float] = {}
    for i in range(meshes):
        body = support.mesh_manifest(f"m{i:03d}", perHost=[{"name": "procs", "size": 1}], template={
            "nodeSelector": NOWHERE, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}})
        if queue is not None:
            body["metadata"]["labels"] = {workloads.QUEUE_NAME_LABEL: queue}
        custom.create_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                               contract.PLURAL, body)
        created[body["metadata"]["name"]] = time.monotonic()
    for t in watchers:
        t.join(timeout=600)
    stop.set()
    missing = sorted(set(created) - set(pods_seen))
    if missing:
        raise RuntimeError(f"{len(missing)} meshes got no pod in 600 s (first: {missing[0]})")
    pod_latency = sorted(pods_seen[n] - created[n] for n in created)
    result = {"pod_latency": pod_latency,
              "all_pods_seconds": max(pods_seen.values()) - min(created.values())}
    if queue is not None:
        result["admitted_latency"] = sorted(admitted[n] - created[n] for n in created if n in admitted)
    return result


def _queue(custom: Any, namespace: str, meshes: int) -> str:
    flavor, cq = f"flavor-{namespace}", f"cq-{namespace}"
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "resourceflavors",
                                        configs.resource_flavor(flavor))
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "clusterqueues",
                                        configs.cluster_queue(cq, flavor, {
                                            "cpu": str(meshes), "memory": f"{meshes}Gi"}))
    custom.create_namespaced_custom_object(configs.GROUP, configs.VERSION, namespace, "localqueues",
                                           configs.local_queue(namespace, "bench", cq))
    return "bench"


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--meshes", type=int, default=100)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)

    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SETTINGS}
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-bench-kueue-"))
    cluster = controlplane.Cluster(folder / "cluster")
    cluster.up([NodeConfig("node-0", pods=args.meshes + 20)])
    kueue = None
    try:
        kueue = manager.start(cluster)
        support.install_crd(cluster.kubeconfig)
        api = config.new_client_from_config(str(cluster.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        operator = support.OperatorProcess(cluster.kubeconfig, folder)
        operator.start()
        try:
            for i in range(args.repeat):
                for setting in (SETTINGS if i % 2 == 0 else SETTINGS[::-1]):
                    namespace = fresh_namespace(core, f"bench-{setting}")
                    queue = _queue(custom, namespace, args.meshes) if setting == "kueue" else None
                    results[setting].append(run_round(api, namespace, args.meshes, queue))
                    core.delete_namespace(namespace)
                    wait_gone(core, namespace)
        finally:
            operator.stop()
    finally:
        if kueue is not None:
            kueue.stop()
        cluster.down()

    report: dict[str, Any] = {"meshes": args.meshes, "repeat": args.repeat}
    for s in SETTINGS:
        latencies = sorted(x for r in results[s] for x in r["pod_latency"])
        report[f"{s}_pod_median_seconds"] = round(statistics.median(latencies), 3)
        report[f"{s}_pod_p95_seconds"] = round(pct(latencies, 0.95), 3)
        report[f"{s}_pod_max_seconds"] = round(latencies[-1], 3)
        report[f"{s}_all_pods_seconds"] = [round(r["all_pods_seconds"], 3) for r in results[s]]
    admitted = sorted(x for r in results["kueue"] for x in r["admitted_latency"])
    if admitted:
        report["kueue_admitted_median_seconds"] = round(statistics.median(admitted), 3)
        report["kueue_admitted_p95_seconds"] = round(pct(admitted, 0.95), 3)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.meshes} one-proc meshes created back to back, create -> pod exists "
          f"(all rounds: {args.repeat} x {args.meshes} meshes per setting)")
    print(f"{'setting':10}{'median s':>10}{'p95 s':>10}{'max s':>10}{'all pods s (per round)':>28}")
    for s in SETTINGS:
        rounds = ", ".join(f"{x:.1f}" for x in report[f"{s}_all_pods_seconds"])
        print(f"{s:10}{report[f'{s}_pod_median_seconds']:>10.2f}{report[f'{s}_pod_p95_seconds']:>10.2f}"
              f"{report[f'{s}_pod_max_seconds']:>10.2f}{rounds:>28}")
    if admitted:
        print(f"kueue: create -> Admitted=True on the mesh: median "
              f"{report['kueue_admitted_median_seconds']:.2f} s, p95 {report['kueue_admitted_p95_seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
