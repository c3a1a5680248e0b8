"""Benchmark: the operator at scale on KWOK, beside a plain pod-create loop in the same run.

A control plane of tests/cluster with KWOK (tests/cluster/kwok) and fake nodes only; pods run no
process, so what is measured is the API server, the scheduler and the operator. In one run:

1. baselines: a plain client loop creates the pods of ``--procs`` x the first step's meshes
   (rendered by the operator's own builders and settings, as benchmarks/operator.py does), one
   by one, and waits on a watch until all are Ready; then they are deleted. When the operator
   gangs (``--gang``, resolved on the cluster as the operator resolves it), a ganged loop does
   the same by hand with the gang: per mesh the PodGroup the operator renders before its pods,
   each pod naming it (or, in gate mode, every pod gated and its gate lifted once the mesh's
   pods exist). The target ratio is judged against the ganged loop then (the scheduler writes
   a ganged pod twice, whoever created it), and both ratios are reported;
2. waves of ProcMeshes of ``--procs`` procs each, created at once, until the cluster holds each
   count of ``--steps`` (cumulative: 10, 50, 100 means waves of 10, 40 and 50); per wave:
   apply -> Ready of every mesh (p50, p99, and the wave's last), the operator's reconcile
   latency p50/p99 (its procmesh_reconcile_duration_seconds histogram, interpolated as
   Prometheus' histogram_quantile does), API requests per mesh (procmesh_api_requests_total);
3. one mesh of ``--big`` procs beside the same loops creating as many pods, and the client's
   attach of it (wait for Ready, read status and pods, decode the proc table; no connection:
   KWOK pods serve nothing).

The operator's peak RSS (VmHWM) and CPU seconds are read from /proc after each phase. The plot
(``--plot``, PNG) shows apply -> Ready and reconcile latency against the meshes in the cluster.

    python benchmarks/scale.py [--procs 64] [--steps 10,50,100] [--big 1024] [--json] [--plot F]
                               [--operator-arg=--gang=off]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import pathlib
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from kubernetes import client, config  # noqa: E402

from mesh_client._src import contract  # noqa: E402
from mesh_client._src.kubernetes import api as api_mod  # noqa: E402
from mesh_client._src.kubernetes import attaching  # noqa: E402
from procmesh_operator import __main__ as operator_cli  # noqa: E402
from procmesh_operator import ganging, rendering, specs  # noqa: E402
from procmesh_operator import settings as settings_  # noqa: E402
from tests.cluster import controlplane  # noqa: E402
from tests.cluster.kwok import simulator  # noqa: E402
from tests.integration.operator import support  # noqa: E402

PODS_PER_NODE = 110
TARGET_RATIO = 1.1


# --- Pieces ------------------------------------------------------------------------------------

def kwok_spec(hosts: int, procs: int) -> dict[str, Any]:
    """A mesh spec of ``hosts`` x ``procs`` whose pods go to the fake nodes, each proc placed
    by the scheduler alone (``placement.hosts: Any``): with the default DistinctNodes, a host's
    64 procs must share a node of 110 pods, so ten meshes need ten nodes whatever else they
    hold, and the loop's unganged pods split a host across two nodes and never all bind."""
    return {"hosts": hosts, "perHost": [{"name": "procs", "size": procs}],
            "placement": {"hosts": contract.HOSTS_ON_ANY_NODES},
            "template": {"nodeSelector": simulator.node_selector(),
                         "tolerations": [simulator.toleration()]}}


def shape(procs: int) -> tuple[int, int]:
    """(hosts, per host) for a mesh of ``procs``: at most 64 a host, as a GPU box would."""
    per_host = min(procs, 64)
    return max(1, procs // per_host), per_host


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What the loop creates for one mesh, in order: the token Secret, the PodGroup (only when
    the loop gangs its pods as the operator does), then the pods."""

    secret: dict[str, Any]
    pod_group: dict[str, Any] | None
    pods: list[dict[str, Any]]


def operator_settings(operator_args: Sequence[str]) -> settings_.Settings:
    """The Settings the operator builds from ``operator_args`` (its own parser, so defaults
    and flags such as ``--gang`` or ``--default-image`` are read exactly as it reads them)."""
    parsed = operator_cli.parse_args(["--all-namespaces", *operator_args])
    return settings_.Settings(**{f.name: getattr(parsed, f.name)
                                 for f in dataclasses.fields(settings_.Settings)
                                 if hasattr(parsed, f.name)})


def baseline(namespace: str, name: str, procs: int, gang: str = ganging.OFF,
             settings: settings_.Settings | None = None) -> Baseline:
    """The token Secret, PodGroup and pods the operator would render for such a mesh under the
    cluster's gang ``gang`` (:func:`ganging.resolve_mode`'s answer; ``off``: plain pods),
    unowned and without the mesh label: the loop's objects are no mesh's, and the operator's
    pod watch (and cache) must not see them. Like the operator, a one-proc mesh is not
    ganged (:func:`ganging.mode_for`)."""
    hosts, per_host = shape(procs)
    mesh = specs.parse({"metadata": {"name": name, "namespace": namespace,
                                     "uid": str(uuid.uuid4()), "generation": 1},
                        "spec": kwok_spec(hosts, per_host)})
    settings = settings or settings_.Settings()
    mode = ganging.mode_for(gang, mesh)
    secret = rendering.render_secret(mesh, rendering.new_token())
    # Named as its pods reference it: an operator whose Secret's name the API server generates
    # reads that name back into the pods; the loop, which creates both, names it.
    secret["metadata"].pop("generateName", None)
    secret["metadata"]["name"] = mesh.token_secret
    pod_group = ganging.render_pod_group(mesh) if mode == ganging.POD_GROUP else None
    pods = [ganging.join(rendering.render_pod(mesh, r, rendering.ProcPlacement(), settings),
                         mesh, mode) for r in range(mesh.size)]
    for obj in (secret, *([pod_group] if pod_group else []), *pods):
        del obj["metadata"]["ownerReferences"]
        obj["metadata"].get("labels", {}).pop(contract.MESH_LABEL, None)
    return Baseline(secret, pod_group, pods)


def baseline_pods(namespace: str, name: str, procs: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The token Secret and plain (unganged) pods the operator would render for such a mesh."""
    objects = baseline(namespace, name, procs)
    return objects.secret, objects.pods


def gang_mode(api_client: Any, setting: str) -> str:
    """The gang the operator picks on this cluster for ``--gang=setting``, as it picks it: the
    discovery document of the PodGroup API (absent: not served)."""
    discovery = None
    if setting == ganging.AUTO:
        response = api_client.call_api("GET", api_client.configuration.host + ganging.POD_GROUP_API)
        response.read()
        if response.status == 200:
            discovery = json.loads(response.data)
        elif response.status != 404:
            raise RuntimeError(f"GET {ganging.POD_GROUP_API}: HTTP {response.status} "
                               f"{response.data[:200]!r}; the PodGroup API's discovery failed")
    return ganging.resolve_mode(setting, discovery)


def raw_watch(call: Any, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Watch events as plain JSON (the typed models cost about 1 ms an event, which would make
    the waiting client, not the cluster, the bottleneck at thousands of pods)."""
    response = call(*args, watch=True, _preload_content=False, timeout_seconds=900, **kwargs)
    try:
        for line in response:
            if line.strip():
                yield json.loads(line)
    finally:
        response.close()


def wait_all(call: Any, args: Sequence[Any], done: Any, expected: int,
             timeout: float = 1800.0) -> dict[str, float]:
    """When each of ``expected`` objects listed by ``call(*args)`` first satisfied ``done``
    (monotonic seconds), by name: a list, then a watch from its resourceVersion, listed again
    whenever the watch ends or errs (an apiserver may close a watch at any time)."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(seen)} of {expected} ready after {timeout:.0f} s")
        listed = json.loads(call(*args, _preload_content=False).data)
        for obj in listed.get("items") or []:
            if done(obj):
                seen.setdefault(obj["metadata"]["name"], time.monotonic())
        if len(seen) >= expected:
            break
        for event in raw_watch(call, *args, resource_version=listed["metadata"]["resourceVersion"]):
            if event.get("type") == "ERROR":
                break  # e.g. 410 Gone: list again
            obj = event["object"]
            if event.get("type") != "DELETED" and done(obj):
                seen.setdefault(obj["metadata"]["name"], time.monotonic())
            if len(seen) >= expected:
                break
    return seen


def pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def fresh_namespace(core: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + 120
    while True:  # pods need the namespace's default service account
        try:
            core.read_namespaced_service_account("default", name)
            return name
        except client.ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def delete_namespace(core: Any, namespace: str) -> None:
    """Delete and wait until its pods are gone (KWOK's pod-delete stage removes them)."""
    core.delete_namespace(namespace)
    deadline = time.monotonic() + 600
    while core.list_namespaced_pod(namespace, limit=1).items and time.monotonic() < deadline:
        time.sleep(0.5)


# --- The operator's own figures --------------------------------------------------------------

def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of metric ``name`` in Prometheus' text format."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        labels: dict[str, str] = {}
        if "{" in head:
            metric, _, rest = head.partition("{")
            if metric != name:
                continue
            for pair in filter(None, rest.rstrip("}").split(",")):
                key, _, val = pair.partition("=")
                labels[key] = val.strip('"')
        elif head != name:
            continue
        out.append((labels, float(value)))
    return out


def requests_total(text: str) -> float:
    return sum(v for _, v in metric_samples(text, "procmesh_api_requests_total"))


def requests_by_kind(text: str) -> dict[str, float]:
    """The operator's requests so far by "verb resource" (codes summed)."""
    out: dict[str, float] = {}
    for labels, value in metric_samples(text, "procmesh_api_requests_total"):
        kind = f"{labels.get('verb', '?')} {labels.get('resource', '?')}"
        out[kind] = out.get(kind, 0.0) + value
    return out


def reconcile_buckets(text: str) -> dict[float, float]:
    """Cumulative counts by upper bound of the reconcile-duration histogram."""
    return {math.inf if labels["le"] == "+Inf" else float(labels["le"]): v
            for labels, v in metric_samples(text, "procmesh_reconcile_duration_seconds_bucket")}


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """histogram_quantile(q) of the observations between two scrapes (linear within a bucket)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts):
        if cumulative >= rank:
            if bound == math.inf:
                return lower  # above the last finite bucket: its bound, as Prometheus does
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


def apiserver_metrics(api_client: Any) -> str:
    """The API server's own /metrics (the admin client may read them)."""
    response = api_client.call_api("GET", api_client.configuration.host + "/metrics")
    response.read()
    return str(response.data.decode())


def server_requests(text: str) -> dict[str, float]:
    """What the API server served, by "VERB resource[/subresource]" (codes and groups summed):
    every client's requests (scheduler, KWOK, controllers, the operator, the benchmark)."""
    out: dict[str, float] = {}
    for labels, value in metric_samples(text, "apiserver_request_total"):
        resource = labels.get("resource", "?")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        key = f"{labels.get('verb', '?')} {resource}"
        out[key] = out.get(key, 0.0) + value
    return out


def server_latency(text: str, verb: str, resource: str) -> tuple[float, float]:
    """(sum of seconds, count) of the API server's handling of ``verb resource`` requests."""
    total = count = 0.0
    for name, acc in (("apiserver_request_duration_seconds_sum", "sum"),
                      ("apiserver_request_duration_seconds_count", "count")):
        for labels, value in metric_samples(text, name):
            if labels.get("verb") == verb and labels.get("resource") == resource and \
                    not labels.get("subresource"):
                if acc == "sum":
                    total += value
                else:
                    count += value
    return total, count


def server_delta(before: str, after: str, per: float) -> dict[str, Any]:
    """The API server's work between two scrapes: the largest request counts (divided by
    ``per``, e.g. pods) and the mean server-side latency of a pod create."""
    b, a = server_requests(before), server_requests(after)
    moved = {k: v - b.get(k, 0.0) for k, v in a.items() if v - b.get(k, 0.0) >= 1}
    top = dict(sorted(moved.items(), key=lambda kv: -kv[1])[:14])
    (s0, c0), (s1, c1) = server_latency(before, "POST", "pods"), server_latency(after, "POST", "pods")
    return {"requests_total": round(sum(moved.values())),
            "requests_per_pod": {k: round(v / per, 2) for k, v in top.items()},
            "pod_create_mean_ms": round(1000 * (s1 - s0) / (c1 - c0), 1) if c1 > c0 else None}


def process_usage(pid: int) -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds) of a live process, from /proc."""
    peak = 0.0
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return peak, (int(fields[11]) + int(fields[12])) / ticks


def say(text: str) -> None:
    """Progress on stderr (a run takes minutes; stdout is the table or the JSON)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# --- Runs --------------------------------------------------------------------------------------

def run_loop(core: Any, custom: Any, procs_per_mesh: int, meshes: int, gang: str = ganging.OFF,
             settings: settings_.Settings | None = None) -> dict[str, Any]:
    """The loop by hand: per mesh, its Secret, its PodGroup (``gang`` podgroup) and its pods
    created one by one (``gang`` gate: their gates lifted once all of the mesh's exist, as the
    operator does when they fit), then every pod watched to Ready. ``off``: the plain loop."""
    namespace = fresh_namespace(core, "loop")
    server_before = apiserver_metrics(core.api_client)
    started = time.monotonic()
    names: set[str] = set()
    for i in range(meshes):
        objects = baseline(namespace, f"base{i}", procs_per_mesh, gang, settings)
        core.create_namespaced_secret(namespace, objects.secret)
        if objects.pod_group is not None:
            custom.create_namespaced_custom_object(
                ganging.POD_GROUP_GROUP, ganging.POD_GROUP_VERSION, namespace,
                ganging.POD_GROUP_PLURAL, objects.pod_group)
        for pod in objects.pods:
            core.create_namespaced_pod(namespace, pod)
            names.add(pod["metadata"]["name"])
        for pod in objects.pods:
            if ganging.is_gated(pod):
                core.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                          ganging.ungate_patch(pod))
    wait_all(core.list_namespaced_pod, (namespace,), pod_ready, len(names))
    seconds = time.monotonic() - started
    server = server_delta(server_before, apiserver_metrics(core.api_client), len(names))
    delete_namespace(core, namespace)
    return {"pods": len(names), "gang": gang, "seconds": round(seconds, 3), "api_server": server}


def run_wave(core: Any, custom: Any, operator: support.OperatorProcess, meshes: int,
             procs: int, in_cluster: int, timeout: float = 1800.0) -> dict[str, Any]:
    """``meshes`` ProcMeshes created at once in a fresh namespace, each watched to Ready."""
    namespace = fresh_namespace(core, f"wave{in_cluster}")
    before = operator.metrics()
    server_before = apiserver_metrics(core.api_client)
    hosts, per_host = shape(procs)
    created: dict[str, float] = {}
    started = time.monotonic()
    started_epoch = time.time()
    for i in range(meshes):
        name = f"m{i}"
        body = {"apiVersion": contract.API_VERSION, "kind": contract.KIND,
                "metadata": {"name": name}, "spec": kwok_spec(hosts, per_host)}
        custom.create_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                               contract.PLURAL, body)
        created[name] = time.monotonic()
    ready = wait_all(custom.list_namespaced_custom_object,
                     (contract.GROUP, contract.VERSION, namespace, contract.PLURAL),
                     lambda obj: support.condition(obj, contract.READY).get("status") == "True",
                     meshes, timeout=timeout)
    wave_seconds = time.monotonic() - started
    time.sleep(1.0)  # the last status writes and events, before counting requests
    after = operator.metrics()
    server = server_delta(server_before, apiserver_metrics(core.api_client), meshes * procs)
    latencies = [ready[n] - created[n] for n in created]
    before_b, after_b = reconcile_buckets(before), reconcile_buckets(after)
    peak_mb, cpu = process_usage(operator.proc.pid) if operator.proc else (0.0, 0.0)
    return {
        "namespace": namespace,
        "meshes_in_cluster": in_cluster, "new_meshes": meshes, "procs_per_mesh": procs,
        "pods": meshes * procs, "wave_seconds": round(wave_seconds, 3),
        "ready_p50_seconds": round(percentile(latencies, 0.5), 3),
        "ready_p99_seconds": round(percentile(latencies, 0.99), 3),
        "reconciles": int(after_b.get(math.inf, 0) - before_b.get(math.inf, 0)),
        "reconcile_p50_seconds": _round(quantile(0.5, before_b, after_b)),
        "reconcile_p99_seconds": _round(quantile(0.99, before_b, after_b)),
        "requests_per_mesh": round((requests_total(after) - requests_total(before)) / meshes, 1),
        "requests_per_mesh_by_kind": {
            k: round((v - requests_by_kind(before).get(k, 0.0)) / meshes, 1)
            for k, v in sorted(requests_by_kind(after).items())
            if v - requests_by_kind(before).get(k, 0.0) > 0},
        "operator_peak_rss_mb": round(peak_mb, 1), "operator_cpu_seconds": round(cpu, 1),
        "api_server": server,
        "cluster": pod_timeline(core, namespace, started_epoch),
    }


def run_attach(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    """What attach does before connecting, timed: wait for Ready (mesh + pods read and
    assessed), then the procs decoded, their addresses parsed and their pod uids recorded
    (connect_mesh's attached_uids: no pod list above contract.MAX_LISTED_PROCS)."""
    api = api_mod.KubeApi(api_client, namespace)
    started = time.monotonic()
    mesh = attaching.wait_ready(api, name, timeout=60, progress=False)
    procs = contract.status_procs(mesh)
    addresses = [p["address"].rpartition(":")[::2] for p in procs]
    attaching.attached_uids(api, name, [p["pod"] for p in procs])  # as connect_mesh does
    seconds = time.monotonic() - started
    status_bytes = len(json.dumps(mesh["status"], separators=(",", ":")))
    return {"procs": len(addresses), "attach_read_seconds": round(seconds, 3),
            "status_bytes": status_bytes}


def pod_census(core: Any, namespace: str) -> dict[str, Any]:
    """Where a mesh that did not become Ready stands: its pods by phase, bound, and by the
    reason of their PodScheduled condition (none at all: the scheduler never tried them)."""
    pods = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    scheduled: dict[str, int] = {}
    for pod in pods:
        c = next((c for c in (pod.get("status") or {}).get("conditions") or []
                  if c.get("type") == "PodScheduled"), None)
        key = "no PodScheduled condition" if c is None else f"{c.get('status')} {c.get('reason')}"
        scheduled[key] = scheduled.get(key, 0) + 1
    return {"pods": len(pods),
            "bound": sum(1 for p in pods if (p.get("spec") or {}).get("nodeName")),
            "pod_scheduled": scheduled}


def pod_timeline(core: Any, namespace: str, started_epoch: float) -> dict[str, Any]:
    """When a quarter, half, three quarters and all of the wave's pods were created, bound and
    Ready, in seconds from the wave's start (the API's timestamps, to the second): what the
    cluster took, apart from how late the operator reported Ready after that."""
    pods = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]

    def seconds(stamp: str | None) -> float | None:
        if not stamp:
            return None
        when = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        return round(when - started_epoch, 1)

    def quartiles(values: Sequence[float | None]) -> list[float] | None:
        """When a quarter, half, three quarters and all of the pods had got there."""
        known = sorted(v for v in values if v is not None)
        if not known:
            return None
        return [known[max(0, math.ceil(q * len(known)) - 1)] for q in (0.25, 0.5, 0.75, 1.0)]

    def transition(pod: dict[str, Any], type_: str) -> float | None:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == type_ and c.get("status") == "True":
                return seconds(c.get("lastTransitionTime"))
        return None

    return {"pods_created_seconds": quartiles([seconds(p["metadata"].get("creationTimestamp"))
                                               for p in pods]),
            "pods_bound_seconds": quartiles([transition(p, "PodScheduled") for p in pods]),
            "pods_ready_seconds": quartiles([transition(p, "Ready") for p in pods])}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@contextlib.contextmanager
def kwok_environment(nodes: int, operator_args: Sequence[str] = ()
                     ) -> Iterator[tuple[controlplane.Cluster, support.OperatorProcess]]:
    """A fresh control plane, KWOK with ``nodes`` fake nodes, the CRD and the operator (run
    with ``operator_args``)."""
    cluster = controlplane.Cluster(pathlib.Path(tempfile.mkdtemp(prefix="pm-scale-")))
    cluster.up([])
    try:
        simulator.start(cluster)
        simulator.add_nodes(cluster, [f"kwok-node-{i}" for i in range(nodes)], pods=PODS_PER_NODE,
                            timeout=600)
        folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-scale-operator-"))
        with support.operator_with_crd(cluster.kubeconfig, folder, *operator_args) as operator:
            yield cluster, operator
    finally:
        cluster.down()


def ratios(report: dict[str, Any]) -> dict[str, Any]:
    """The operator against doing the same by hand: the first wave (and the big mesh) over the
    plain loop and, when the operator gangs, over the ganged loop too. The target is judged
    like for like: against the ganged loop when the operator gangs (the scheduler then writes
    each pod twice whoever created it), else against the plain loop; with ``--bracket``
    against the mean of that loop before and after the waves."""
    first = report["waves"][0]["wave_seconds"]
    out: dict[str, Any] = {"ratio_first_wave": round(first / report["loop"]["seconds"], 3)}
    if "ganged_loop" in report:
        out["ratio_first_wave_ganged"] = round(first / report["ganged_loop"]["seconds"], 3)
    big = report.get("big_mesh") or {}
    if "wave_seconds" in big:
        out["ratio_big"] = round(big["wave_seconds"] / report["big_loop"]["seconds"], 3)
        if "big_ganged_loop" in report:
            out["ratio_big_ganged"] = round(big["wave_seconds"]
                                            / report["big_ganged_loop"]["seconds"], 3)
    key = "ganged_loop" if "ganged_loop" in report else "loop"
    out["target_baseline"] = key
    out["target_ratio"] = TARGET_RATIO
    out["target_ratio_measured"] = round(first / report[key]["seconds"], 3)
    if f"{key}_after" in report:  # --bracket: the mean of the loop before and after the waves
        after = report[f"{key}_after"]["seconds"]
        out[f"ratio_first_wave_{key}_after"] = round(first / after, 3)
        out["target_baseline"] = f"mean of {key} and {key}_after"
        out["target_ratio_measured"] = round(first / ((report[key]["seconds"] + after) / 2), 3)
    out["target_met"] = out["target_ratio_measured"] <= TARGET_RATIO
    return out


def plot(report: dict[str, Any], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    waves = report["waves"]
    x = [w["meshes_in_cluster"] for w in waves]
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4))
    left.plot(x, [w["ready_p50_seconds"] for w in waves], "o-", label="apply -> Ready p50")
    left.plot(x, [w["ready_p99_seconds"] for w in waves], "o--", label="apply -> Ready p99")
    for w in waves:
        left.annotate(f"wave of {w['new_meshes']}", (w["meshes_in_cluster"], w["ready_p50_seconds"]),
                      textcoords="offset points", xytext=(4, -12), fontsize=8)
    left.axhline(report["loop"]["seconds"], color="grey", linestyle=":",
                 label=f"plain loop, {report['loop']['pods']} pods")
    if "ganged_loop" in report:
        left.axhline(report["ganged_loop"]["seconds"], color="black", linestyle="-.",
                     label=f"ganged loop ({report.get('gang')}), "
                           f"{report['ganged_loop']['pods']} pods")
    left.set_xlabel("meshes in the cluster after the wave")
    left.set_ylabel("seconds")
    left.set_title(f"{report['procs']}-proc meshes created at once")
    left.legend(fontsize=8)
    middle.plot(x, [w["reconcile_p50_seconds"] or 0 for w in waves], "o-", label="reconcile p50")
    middle.plot(x, [w["reconcile_p99_seconds"] or 0 for w in waves], "o--",
                label="reconcile p99 (300 = histogram's last bound)")
    middle.set_xlabel("meshes in the cluster after the wave")
    middle.set_ylabel("seconds")
    middle.set_title("operator reconcile latency")
    middle.legend(fontsize=8)
    cpu, before = [], 0.0
    for w in waves:  # the operator's CPU is cumulative: per wave, per new mesh
        cpu.append((w["operator_cpu_seconds"] - before) / w["new_meshes"])
        before = w["operator_cpu_seconds"]
    right.plot(x, [w["requests_per_mesh"] for w in waves], "o-", label="API requests per mesh")
    right.plot(x, [c * 100 for c in cpu], "s-", label="operator CPU per mesh (x100 s)")
    right.plot(x, [w["operator_peak_rss_mb"] for w in waves], "^-", label="operator peak RSS (MB)")
    right.set_xlabel("meshes in the cluster after the wave")
    right.set_title("cost per mesh, and memory")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--procs", type=int, default=64, help="procs per mesh of the waves")
    p.add_argument("--steps", default="10", help="meshes in the cluster after each wave, e.g. 10,50,100")
    p.add_argument("--big", type=int, default=1024, help="procs of the one big mesh (0: none)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--plot", type=pathlib.Path, help="write the curve as a PNG here")
    p.add_argument("--operator-arg", action="append", default=[],
                   help="an argument for the operator, e.g. --operator-arg=--gang=off")
    p.add_argument("--big-timeout", type=float, default=1800.0,
                   help="seconds the big mesh may take to be Ready before the run reports it "
                        "not Ready (with a census of its pods) and ends")
    p.add_argument("--bracket", action="store_true",
                   help="run the target's loop (ganged when the operator gangs) again after the "
                        "waves, once their meshes are deleted, and judge the target against the "
                        "mean of the loop before and after (load that changes during a run then "
                        "hits the baseline as it hits the waves)")
    p.add_argument("--replot", type=pathlib.Path,
                   help="draw --plot from a report saved with --json (or its waves), run nothing")
    args = p.parse_args(argv)
    if args.replot:
        if not args.plot:
            p.error("--replot needs --plot")
        plot(json.loads(args.replot.read_text()), args.plot)
        return 0
    steps = [int(s) for s in args.steps.split(",")]
    pods = steps[-1] * args.procs + args.big
    nodes = math.ceil(pods / (PODS_PER_NODE - 10)) + 1

    settings = operator_settings(args.operator_arg)
    report: dict[str, Any] = {"procs": args.procs, "steps": steps, "big": args.big,
                              "nodes": nodes, "pods_per_node": PODS_PER_NODE,
                              "operator_args": args.operator_arg, "waves": [],
                              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load_average_start": [round(v, 2) for v in os.getloadavg()]}
    with kwok_environment(nodes, args.operator_arg) as (cluster, operator):
        api_client = config.new_client_from_config(str(cluster.kubeconfig))
        core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
        report["gang"] = gang = gang_mode(api_client, settings.gang)
        say(f"{nodes} fake nodes Ready; the operator's gang: {gang}; plain loop of "
            f"{steps[0] * args.procs} pods")
        report["loop"] = run_loop(core, custom, args.procs, steps[0], settings=settings)
        say(f"plain loop: {report['loop']}")
        if gang != ganging.OFF:
            report["ganged_loop"] = run_loop(core, custom, args.procs, steps[0], gang, settings)
            say(f"ganged loop: {report['ganged_loop']}")
        in_cluster = 0
        for step in steps:
            report["waves"].append(run_wave(core, custom, operator, step - in_cluster, args.procs,
                                            step))
            say(f"wave to {step} meshes: {report['waves'][-1]}")
            in_cluster = step
        if args.bracket:  # the target's loop again, on a cluster emptied of the waves
            for wave in report["waves"]:
                delete_namespace(core, wave["namespace"])
            in_cluster = 0
            key = "ganged_loop" if gang != ganging.OFF else "loop"
            report[f"{key}_after"] = run_loop(core, custom, args.procs, steps[0],
                                              report[key]["gang"], settings)
            say(f"{key} after the waves: {report[f'{key}_after']}")
        if args.big:
            report["big_loop"] = run_loop(core, custom, args.big, 1, settings=settings)
            say(f"plain loop of {args.big} pods: {report['big_loop']}")
            if gang != ganging.OFF:
                report["big_ganged_loop"] = run_loop(core, custom, args.big, 1, gang, settings)
                say(f"ganged loop of {args.big} pods: {report['big_ganged_loop']}")
            namespace_prefix = f"wave{in_cluster + 1}-"
            try:
                big = run_wave(core, custom, operator, 1, args.big, in_cluster + 1,
                               timeout=args.big_timeout)
            except TimeoutError as e:
                namespace = max((n for n in core.list_namespace().items
                                 if n.metadata.name.startswith(namespace_prefix)),
                                key=lambda n: str(n.metadata.creation_timestamp)).metadata.name
                report["big_mesh"] = {"ready": False, "why": str(e),
                                      **pod_census(core, namespace)}
                say(f"{args.big}-proc mesh not Ready: {report['big_mesh']}")
            else:
                report["big_mesh"] = {**big, **run_attach(api_client, big["namespace"], "m0")}
    report["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    report.update(ratios(report))
    if args.plot:
        plot(report, args.plot)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    loop = report["loop"]
    print(f"KWOK: {nodes} fake nodes of {PODS_PER_NODE} pods; meshes of {args.procs} procs; "
          f"the operator's gang: {report['gang']}")
    print(f"plain loop, {loop['pods']} pods: {loop['seconds']:.2f} s")
    if "ganged_loop" in report:
        print(f"ganged loop ({report['gang']}), {report['ganged_loop']['pods']} pods: "
              f"{report['ganged_loop']['seconds']:.2f} s")
    head = ("meshes", "wave s", "Ready p50", "Ready p99", "reconciles", "rec p50", "rec p99",
            "req/mesh", "RSS MB", "CPU s")
    print("".join(f"{h:>11}" for h in head))
    for w in report["waves"]:
        row = (w["meshes_in_cluster"], w["wave_seconds"], w["ready_p50_seconds"],
               w["ready_p99_seconds"], w["reconciles"], w["reconcile_p50_seconds"],
               w["reconcile_p99_seconds"], w["requests_per_mesh"], w["operator_peak_rss_mb"],
               w["operator_cpu_seconds"])
        print("".join(f"{v:>11}" for v in row))
    print(f"ratio first wave / plain loop: {report['ratio_first_wave']:.2f}")
    if "ratio_first_wave_ganged" in report:
        print(f"ratio first wave / ganged loop: {report['ratio_first_wave_ganged']:.2f}")
    for key in ("loop_after", "ganged_loop_after"):
        if key in report:
            print(f"{key.replace('_', ' ')} the waves: {report[key]['seconds']:.2f} s")
    print(f"target <= {TARGET_RATIO}, judged against the {report['target_baseline']}: "
          f"{report['target_ratio_measured']:.2f}")
    if args.big and "ratio_big" in report:
        big, base = report["big_mesh"], report["big_loop"]
        ganged = (f", ganged loop {report['big_ganged_loop']['seconds']:.2f} s, ratio "
                  f"{report['ratio_big_ganged']:.2f}" if "ratio_big_ganged" in report else "")
        print(f"{args.big}-proc mesh: apply -> Ready {big['wave_seconds']:.2f} s, plain loop "
              f"{base['seconds']:.2f} s, ratio {report['ratio_big']:.2f}{ganged}; "
              f"{big['requests_per_mesh']:.0f} requests; status {big['status_bytes']} bytes; "
              f"attach (read, no connect) {big['attach_read_seconds']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
