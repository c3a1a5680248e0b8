"""Benchmark: a 64-proc ProcMesh from apply to Ready, beside a plain client loop, same run.

Baseline: a client loop creates the same 64 pods (rendered by the operator's own pure builders,
so the specs are identical: proc server, readiness probe, token volume) one by one, then waits
on a watch until every pod is Ready. Operator: create one ProcMesh of 64 procs and wait on a
watch until its Ready condition is True for its generation. Both run on the local control plane
of tests/cluster with process nodes (started here unless --kubeconfig names a running cluster,
which must then have the CRD applied); the operator runs as a subprocess
(``python -m procmesh_operator``). Runs alternate, --repeat times; the table shows medians.
Also reported: API requests the operator made per mesh (its procmesh_api_requests_total), and
the requests of the baseline loop.

    python benchmarks/operator.py [--procs 64] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
import uuid
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
# This file is named like the standard library's `operator` (already imported at startup, so
# not shadowed); drop its folder from the path anyway and put the repository first.
sys.path[:] = [str(ROOT), str(ROOT / "operator")] + [
    p for p in sys.path if pathlib.Path(p or ".").resolve() != pathlib.Path(__file__).parent]

from kubernetes import client, config, watch  # noqa: E402

from benchmarks import cluster_env  # noqa: E402
from mesh_client._src import contract  # noqa: E402
from procmesh_operator import rendering, specs  # noqa: E402
from procmesh_operator import settings as settings_  # noqa: E402

TARGET_RATIO = 1.3


def baseline_pods(namespace: str, procs: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The token Secret and the pods the operator would create, without owner references."""
    mesh = specs.parse({"metadata": {"name": "base", "namespace": namespace, "uid": "none",
                                     "generation": 1},
                        "spec": {"hosts": 1, "perHost": [{"name": "procs", "size": procs}]}})
    # Under the name the pods mount (the mesh records none: the legacy <mesh>-token).
    secret = rendering.render_secret(mesh, rendering.new_token(), mesh.token_secret)
    pods = [rendering.render_pod(mesh, r, rendering.ProcPlacement(), settings_.Settings())
            for r in range(procs)]
    for obj in (secret, *pods):
        del obj["metadata"]["ownerReferences"]
    return secret, pods


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True"
               for c in (pod.status.conditions or [])) and pod.status.phase == "Running"


def run_baseline(core: Any, namespace: str, procs: int) -> dict[str, Any]:
    secret, pods = baseline_pods(namespace, procs)
    requests = 0
    started = time.monotonic()
    core.create_namespaced_secret(namespace, secret)
    requests += 1
    for pod in pods:
        core.create_namespaced_pod(namespace, pod)
        requests += 1
    ready: set[str] = set()
    listed = core.list_namespaced_pod(namespace, label_selector=contract.mesh_label_selector("base"))
    requests += 1
    ready |= {p.metadata.name for p in listed.items if pod_ready(p)}
    if len(ready) < procs:
        w = watch.Watch()
        requests += 1
        for event in w.stream(core.list_namespaced_pod, namespace,
                              label_selector=contract.mesh_label_selector("base"),
                              resource_version=listed.metadata.resource_version,
                              timeout_seconds=600):
            pod = event["object"]
            if pod_ready(pod):
                ready.add(pod.metadata.name)
            if len(ready) >= procs:
                w.stop()
    elapsed = time.monotonic() - started
    return {"seconds": elapsed, "requests": requests}


def run_operator(custom: Any, namespace: str, procs: int, metrics_port: int) -> dict[str, Any]:
    return cluster_env.time_until_ready(custom, namespace, {"hosts": 1, "perHost": [{"name": "procs", "size": procs}]}, metrics_port)


def wait_gone(core: Any, namespace: str) -> None:
    while core.list_namespaced_pod(namespace).items:
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--procs", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--kubeconfig", help="a running cluster (default: start one from tests/cluster)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)

    results: dict[str, list[dict[str, Any]]] = {"baseline": [], "operator": []}
    with cluster_env.cluster_with_operator(args.kubeconfig, max(110, 2 * args.procs + 10)) as (kubeconfig, metrics_port):
        api = config.new_client_from_config(kubeconfig)
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        for i in range(args.repeat):
            order = ("baseline", "operator") if i % 2 == 0 else ("operator", "baseline")
            for which in order:
                namespace = f"bench-{which[:4]}-{uuid.uuid4().hex[:6]}"
                core.create_namespace({"metadata": {"name": namespace}})
                while True:  # pods need the namespace's default service account
                    try:
                        core.read_namespaced_service_account("default", namespace)
                        break
                    except client.ApiException:
                        time.sleep(0.1)
                if which == "baseline":
                    results[which].append(run_baseline(core, namespace, args.procs))
                else:
                    results[which].append(run_operator(custom, namespace, args.procs,
                                                       metrics_port))
                core.delete_namespace(namespace)
                wait_gone(core, namespace)

    base = statistics.median(r["seconds"] for r in results["baseline"])
    oper = statistics.median(r["seconds"] for r in results["operator"])
    report = {
        "procs": args.procs, "repeat": args.repeat,
        "baseline_seconds": [round(r["seconds"], 3) for r in results["baseline"]],
        "operator_seconds": [round(r["seconds"], 3) for r in results["operator"]],
        "baseline_median_seconds": round(base, 3), "operator_median_seconds": round(oper, 3),
        "ratio": round(oper / base, 3), "target_ratio": TARGET_RATIO,
        "baseline_requests": results["baseline"][0]["requests"],
        "operator_requests_per_mesh": [r["requests"] for r in results["operator"]],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.procs}-proc mesh, apply -> Ready, median of {args.repeat} "
              f"(alternating order)")
        print(f"{'':28}{'seconds':>10}{'API requests':>16}")
        print(f"{'plain client loop':28}{base:>10.2f}{report['baseline_requests']:>16}")
        print(f"{'ProcMesh + operator':28}{oper:>10.2f}"
              f"{statistics.median(report['operator_requests_per_mesh']):>16.0f}")
        print(f"ratio operator/baseline: {report['ratio']:.2f} (target <= {TARGET_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
