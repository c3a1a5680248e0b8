"""Benchmark: kills. Procs, the operator, a node and the API server die; how fast and how cleanly
do meshes come back? Figures, not assertions (the correctness versions are the integration tests
tests/integration/operator/test_chaos.py, test_node_loss.py, test_apiserver_restart.py and
test_restarts.py).

Scenarios of the one registry (:mod:`benchmarks.scenarios`), run by the command line of
:mod:`benchmarks.faults`, each with a baseline measured in the same run:

* ``proc-kills``: per restart policy, SIGKILL a random proc of a 3-proc mesh, ``--kills`` times:
  time to the caller's error (a pending ``call_one`` on the killed proc), time back to Ready
  (p50/p99), stuck meshes (not back within ``--stuck-after`` s; the mesh is then recreated).
  Baseline: the kubelet's own in-place restart of a killed container (a plain pod with
  restartPolicy Always on the same node), killed as often (at most ``--baseline-kills``).
* ``operator-kills``: create a 64-proc mesh, SIGKILL the operator at a random point of its
  reconcile, start it again: duplicates, orphans, time to Ready. Baseline: the same mesh with no
  kill, alternating.
* ``node-kills``: a node with a mesh's procs on it dies (agent and pods SIGKILLed): time to the
  mesh's NodeLost condition and back to Ready elsewhere (operator toleration 5 s). Baseline: the
  node controller's own verdict (time to the Node's Ready=Unknown).
* ``node-silences``: every node falls silent at once (its agent SIGSTOPped, pods running on; a
  control-plane outage as the node controller sees it) for longer than its grace plus the
  toleration: procs the operator restarted (0 is right: nothing was lost) and time back to Ready
  once the nodes are heard. Baseline: plain pods on the same node with the same NoExecute
  toleration (5 s), as Kubernetes alone treats them: how many it evicted.
* ``leader-failovers``: two operator replicas, the acting one stopped (SIGTERM) or killed
  (SIGKILL): time from the signal until the other has made a new mesh Ready, with the leader
  election's Lease (15 s) and, as the baseline in the same run, kopf's peering (the chart's
  way before the Lease).
* ``apiserver-restarts``: kube-apiserver SIGKILLed at a random point of a 12-proc reconcile and
  started again: duplicates, orphans, stuck, time to Ready after the API server is back.
  Baseline: the API server's own restart (kill to /readyz).

Every kill scenario of a run shares one fresh local control plane of tests/cluster with a
process node, the operator as a subprocess (:func:`environment`, started on first use). Bounded
by default (a few minutes); ``--kills 1000 --operator-kills 50`` for the targets of issue 12.

    python benchmarks/faults.py --scenario proc-kills --scenario operator-kills [--kills 10] [--json]
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import random
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from kubernetes import client, config  # noqa: E402

from benchmarks import scenarios  # noqa: E402
from mesh_client._src import contract  # noqa: E402
from tests.cluster import components, controlplane, processes  # noqa: E402
from tests.cluster.process_node.config import NodeConfig  # noqa: E402
from tests.integration.operator import support  # noqa: E402

POLICIES = ("RestartProc", "RestartMesh")
NODE_LOSS_TOLERATION = 5


# --- The environment -----------------------------------------------------------------------------

@dataclasses.dataclass
class Env:
    cluster: controlplane.Cluster
    operator: support.OperatorProcess
    core: Any
    custom: Any
    api: Any

    def namespace(self) -> str:
        name = f"kills-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name}})
        wait(lambda: _exists(lambda: self.core.read_namespaced_service_account("default", name)),
             60, "the namespace's default service account")
        return name


def _exists(read: Callable[[], Any]) -> bool:
    try:
        read()
        return True
    except client.ApiException:
        return False


@contextlib.contextmanager
def environment() -> Iterator[Env]:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pm-kills-"))
    cluster = controlplane.Cluster(folder / "cluster")
    cluster.up([NodeConfig("node-0", pods=250)])
    try:
        api = config.new_client_from_config(str(cluster.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        (folder / "operator").mkdir()
        with support.operator_with_crd(cluster.kubeconfig, folder / "operator",
                                       "--node-loss-toleration-seconds",
                                       str(NODE_LOSS_TOLERATION)) as operator:
            yield Env(cluster, operator, core, custom, api)
    finally:
        cluster.down()


class Timeout(Exception):
    pass


def wait(check: Callable[[], Any], seconds: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            got = check()
        except client.ApiException:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise Timeout(what)
        time.sleep(interval)


def ready_mesh(env: Env, namespace: str, name: str, restarts: int | None = None) -> Any:
    mesh = support.get_mesh(env.custom, namespace, name)
    c = support.condition(mesh, "Ready")
    if c.get("status") != "True" or c.get("observedGeneration") != mesh["metadata"]["generation"]:
        return None
    if restarts is not None and (mesh.get("status") or {}).get("restarts") != restarts:
        return None
    return mesh


def delete_mesh(env: Env, namespace: str, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        env.custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                                   contract.PLURAL, name)
    wait(lambda: not support.mesh_pods(env.core, namespace, name), 120, f"{name}'s pods gone")


def audit(env: Env, namespace: str, name: str, size: int) -> dict[str, int]:
    """Duplicates (more than one pod per rank, or two Secrets/Services) and orphans (proc pods
    not owned by the live mesh) in ``namespace``."""
    mesh = support.get_mesh(env.custom, namespace, name)
    pods = env.core.list_namespaced_pod(namespace, label_selector=contract.MESH_LABEL).items
    ranks = [p.metadata.labels.get(contract.RANK_LABEL) for p in pods]
    secrets = [s for s in env.core.list_namespaced_secret(namespace).items
               if s.metadata.name.startswith(name)]
    services = env.core.list_namespaced_service(namespace).items
    duplicates = (len(ranks) - len(set(ranks))) + max(0, len(secrets) - 1) + \
        max(0, len(services) - 1) + sum(1 for p in pods if p.metadata.name not in
                                        {f"{name}-{r}" for r in range(size)})
    orphans = sum(1 for o in pods + secrets + services if not support.owned_by(o, mesh))
    return {"duplicates": duplicates, "orphans": orphans}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99),
            "max": max(values) if values else None}


# --- proc-kills ----------------------------------------------------------------------------------

def _sleeper_class() -> Any:
    from mesh_client import Actor, endpoint

    class Pending(Actor):
        @endpoint
        def hang(self) -> None:
            time.sleep(3600)

    return Pending


def caller_error_seconds(env: Env, namespace: str, name: str, rank: int, kill: Callable[[], None]
                         ) -> tuple[float, str] | None:
    """Kill ``rank`` while a call to it is pending; seconds until the caller sees the error,
    and the error's type."""
    from mesh_client.kubernetes import attach

    procs = attach(name, namespace, api_client=env.api, timeout=60, progress=False)
    try:
        actors = procs.spawn(f"pending-{uuid.uuid4().hex[:6]}", _sleeper_class())
        future = actors.slice(hosts=0, procs=rank).hang.call_one()
        time.sleep(0.05)  # the call is on the wire
        killed = time.monotonic()
        kill()
        try:
            future.get(timeout=30)
        except Exception as e:  # noqa: BLE001 - SupervisionError expected; any error ends it
            return time.monotonic() - killed, type(e).__name__
        return None
    finally:
        with contextlib.suppress(Exception):
            procs.stop()


@scenarios.scenario("proc-kills", "SIGKILL a random proc of a 3-proc mesh --kills times per "
                    "restart policy: caller's error, back to Ready, stuck")
def proc_kills(ctx: scenarios.Context) -> dict[str, Any]:
    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    out: dict[str, Any] = {}
    rng = random.Random(args.seed)
    token_of = support.token
    for policy in POLICIES:
        name = f"kill-{policy.lower()}"
        support.create_mesh(env.custom, namespace, name, perHost=[{"name": "procs", "size": 3}],
                            restartPolicy=policy, maxRestarts=args.kills + 1)
        mesh = wait(lambda n=name: ready_mesh(env, namespace, n), 120, f"{name} Ready")
        token = token_of(env.core, namespace, name)
        back, caller, stuck, restarts = [], [], 0, 0
        errors: dict[str, int] = {}
        for i in range(args.kills):
            rank = rng.randrange(3)
            address = mesh["status"]["procs"][rank]["address"]
            started = [0.0]

            def kill(address: str = address, token: bytes = token,
                     started: list[float] = started) -> None:
                started[0] = time.monotonic()
                support.kill_proc(address, token)

            measure_caller = i < args.caller_kills
            if measure_caller:
                seen = caller_error_seconds(env, namespace, name, rank, kill)
                if seen is not None:
                    caller.append(seen[0])
                    errors[seen[1]] = errors.get(seen[1], 0) + 1
            else:
                kill()
            try:
                mesh = wait(lambda n=name, r=restarts + 1: ready_mesh(env, namespace, n, r),
                            args.stuck_after, "back to Ready")
                back.append(time.monotonic() - started[0])
                restarts += 1
            except Timeout:
                stuck += 1
                delete_mesh(env, namespace, name)
                support.create_mesh(env.custom, namespace, name,
                                    perHost=[{"name": "procs", "size": 3}],
                                    restartPolicy=policy, maxRestarts=args.kills + 1)
                restarts = 0
                mesh = wait(lambda n=name: ready_mesh(env, namespace, n), 120, f"{name} Ready")
                token = token_of(env.core, namespace, name)
        out[policy] = {"kills": args.kills, "stuck": stuck, "back_to_ready_s": summary(back),
                       "caller_error_s": summary(caller), "caller_errors": errors}
        delete_mesh(env, namespace, name)
    out["baseline_kubelet_restart"] = _kubelet_restart(env, namespace,
                                                       min(args.kills, args.baseline_kills))
    return out


def _kubelet_restart(env: Env, namespace: str, kills: int) -> dict[str, Any]:
    """A plain pod (restartPolicy Always) whose container is SIGKILLed: back to Ready."""
    from tests.cluster import testing

    pod = testing.python_pod(
        "plain", "import os,socket,time\ns=socket.socket();"
        "s.bind((os.environ['POD_IP'], 26600));s.listen();time.sleep(3600)",
        restart_policy="Always",
        container={"readinessProbe": {"tcpSocket": {"port": 26600}, "periodSeconds": 1},
                   "env": [{"name": "POD_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]})
    env.core.create_namespaced_pod(namespace, pod)
    back: list[float] = []

    def ready(restarts: int) -> bool:
        p = env.core.read_namespaced_pod("plain", namespace)
        statuses = p.status.container_statuses or []
        return bool(statuses and statuses[0].ready and statuses[0].restart_count == restarts)

    wait(lambda: ready(0), 60, "plain pod Ready")
    for i in range(kills):
        folder = env.cluster.root / "nodes" / "node-0" / "pods"
        pids = [processes.read_pidfile(f) for f in folder.glob(f"{namespace}_plain_*/main.pid")]
        [pid] = [p for p in pids if p is not None]
        started = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        wait(lambda r=i + 1: ready(r), 120, "plain pod back")
        back.append(time.monotonic() - started)
    env.core.delete_namespaced_pod("plain", namespace)
    return {"kills": kills, "back_to_ready_s": summary(back),
            "first_kill_back_to_ready_s": back[0] if back else None,
            "note": "CrashLoopBackOff from the 2nd kill: the process node's back-off starts at "
                    "1 s and doubles to 30 s (the kubelet's: 10 s to 300 s)"}


# --- operator-kills ------------------------------------------------------------------------------

@scenarios.scenario("operator-kills", "SIGKILL the operator at a random point of a 64-proc "
                    "reconcile: duplicates, orphans, time to Ready")
def operator_kills(ctx: scenarios.Context) -> dict[str, Any]:
    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    rng = random.Random(args.seed)
    size = args.procs
    killed_runs, baseline_runs = [], []
    totals = {"duplicates": 0, "orphans": 0, "stuck": 0}
    rounds = [("kill", i) for i in range(args.operator_kills)]
    baselines = max(1, args.operator_kills // 5)
    for j in range(baselines):  # interleaved
        rounds.insert(min(len(rounds), j * 6), ("baseline", j))
    for kind, i in rounds:
        name = f"big-{kind}-{i}"
        started = time.monotonic()
        support.create_mesh(env.custom, namespace, name, perHost=[{"name": "procs", "size": size}])
        if kind == "kill":
            # a random point of the reconcile: after 0 to `size` pods exist
            target = rng.randrange(size)
            wait(lambda n=name, t=target: len(support.mesh_pods(env.core, namespace, n)) >= t,
                 120, "pods appear")
            env.operator.stop(signal.SIGKILL)
            env.operator.start("--node-loss-toleration-seconds", str(NODE_LOSS_TOLERATION))
        try:
            wait(lambda n=name: ready_mesh(env, namespace, n), args.stuck_after * 4, "Ready")
            elapsed = time.monotonic() - started
            (killed_runs if kind == "kill" else baseline_runs).append(elapsed)
        except Timeout:
            totals["stuck"] += 1
        if kind == "kill":
            found = audit(env, namespace, name, size)
            totals["duplicates"] += found["duplicates"]
            totals["orphans"] += found["orphans"]
        delete_mesh(env, namespace, name)
    return {"procs": size, "operator_kills": args.operator_kills, **totals,
            "time_to_ready_s": summary(killed_runs),
            "baseline_no_kill_time_to_ready_s": summary(baseline_runs)}


# --- node-kills ----------------------------------------------------------------------------------

@scenarios.scenario("node-kills", "a node with a mesh's procs dies: time to NodeLost and back "
                    "to Ready elsewhere")
def node_kills(ctx: scenarios.Context) -> dict[str, Any]:
    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    lost_s, back_s, node_s = [], [], []
    stuck = 0
    for i in range(args.node_kills):
        node = f"doomed-{i}"
        env.cluster.add_node(NodeConfig(node))
        wait(lambda n=node: not env.core.read_node(n).spec.taints, 60, "node untainted")
        name = f"lossy-{i}"
        affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "preference": {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}
        support.create_mesh(env.custom, namespace, name, perHost=[{"name": "procs", "size": 2}],
                            restartPolicy="RestartProc", maxRestarts=5,
                            template={"affinity": affinity})
        wait(lambda n=name: ready_mesh(env, namespace, n), 120, "Ready")
        started = time.monotonic()
        env.cluster.kill_node(node)

        def node_unknown(n: str = node) -> bool:
            conditions = env.core.read_node(n).status.conditions or []
            return any(c.type == "Ready" and c.status != "True" for c in conditions)

        def reported(n: str = name) -> bool:
            c = support.condition(support.get_mesh(env.custom, namespace, n), "Ready")
            return c.get("reason") == "NodeLost"

        def elsewhere(n: str = name, dead: str = node) -> bool:
            m = ready_mesh(env, namespace, n)
            return bool(m) and dead not in {p.get("node") for p in m["status"]["procs"]}

        try:
            marks: dict[str, float] = {}
            deadline = time.monotonic() + 180
            while len(marks) < 3 and time.monotonic() < deadline:
                for key, check in (("node", node_unknown), ("lost", reported),
                                   ("back", elsewhere)):
                    if key not in marks and _safe(check):
                        marks[key] = time.monotonic() - started
                time.sleep(0.1)
            if "back" not in marks:
                stuck += 1
            node_s += [marks["node"]] if "node" in marks else []
            lost_s += [marks["lost"]] if "lost" in marks else []
            back_s += [marks["back"]] if "back" in marks else []
        finally:
            delete_mesh(env, namespace, name)
            with contextlib.suppress(client.ApiException):
                env.core.delete_node(node)
    return {"node_kills": args.node_kills, "stuck": stuck,
            "node_monitor_grace_s": components.NODE_MONITOR_GRACE_SECONDS,
            "toleration_s": NODE_LOSS_TOLERATION,
            "mesh_reports_node_lost_s": summary(lost_s), "back_to_ready_elsewhere_s": summary(back_s),
            "baseline_node_marked_not_ready_s": summary(node_s),
            "kubernetes_default_eviction_s": 300 + components.NODE_MONITOR_GRACE_SECONDS}


def _safe(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except client.ApiException:
        return False


# --- node-silences -------------------------------------------------------------------------------

PLAIN_PODS = 3


@scenarios.scenario("node-silences", "every node silent at once past its grace and toleration: "
                    "procs restarted (0 is right), plain pods Kubernetes evicted")
def node_silences(ctx: scenarios.Context) -> dict[str, Any]:
    from tests.cluster import testing

    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    restarted, evicted, back_s = 0, 0, []
    toleration = [{"key": key, "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": NODE_LOSS_TOLERATION}
                  for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]
    for i in range(args.silences):
        name = f"silent-{i}"
        support.create_mesh(env.custom, namespace, name, perHost=[{"name": "procs", "size": 2}],
                            restartPolicy="RestartProc", maxRestarts=10)
        plain = [f"plain-{i}-{k}" for k in range(PLAIN_PODS)]
        for pod_name in plain:
            body = testing.python_pod(pod_name, "import time\ntime.sleep(3600)")
            body["spec"]["tolerations"] = toleration
            env.core.create_namespaced_pod(namespace, body)
        wait(lambda n=name: ready_mesh(env, namespace, n), 120, "mesh Ready")
        wait(lambda names=plain: all(env.core.read_namespaced_pod(p, namespace).status.phase
                                     == "Running" for p in names), 120, "plain pods Running")
        uids = {p: env.core.read_namespaced_pod(p, namespace).metadata.uid for p in plain}
        with env.cluster.nodes_silenced():
            time.sleep(components.NODE_MONITOR_GRACE_SECONDS + 15 + NODE_LOSS_TOLERATION + 10)
        heard = time.monotonic()
        mesh = wait(lambda n=name: ready_mesh(env, namespace, n), 180, "mesh Ready again")
        back_s.append(time.monotonic() - heard)
        restarted += int(mesh["status"].get("restarts") or 0)
        for pod_name, uid in uids.items():
            try:
                pod = env.core.read_namespaced_pod(pod_name, namespace)
                evicted += int(pod.metadata.uid != uid or pod.metadata.deletion_timestamp is not None)
            except client.ApiException as e:
                evicted += int(e.status == 404)
            with contextlib.suppress(client.ApiException):
                env.core.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0)
        delete_mesh(env, namespace, name)
    return {"silences": args.silences, "procs": 2 * args.silences, "procs_restarted": restarted,
            "silence_s": components.NODE_MONITOR_GRACE_SECONDS + 15 + NODE_LOSS_TOLERATION + 10,
            "mesh_ready_after_nodes_heard_s": summary(back_s),
            "baseline_plain_pods": PLAIN_PODS * args.silences,
            "baseline_plain_pods_evicted_by_kubernetes": evicted}


# --- leader-failovers ----------------------------------------------------------------------------

PEERING = "bench-failover"


def _replica(env: Env, way: str, name: str, priority: int) -> support.OperatorProcess:
    folder = pathlib.Path(tempfile.mkdtemp(prefix=f"pm-{way}-{name}-"))
    op = support.OperatorProcess(env.cluster.kubeconfig, folder)
    if way == "lease":
        op.start("--leader-election", PEERING, "--leader-election-namespace", "default")
    else:
        op.start("--peering", PEERING, "--priority", str(priority), standalone=False)
    return op


def _acting(env: Env, way: str, op: support.OperatorProcess) -> bool:
    """Whether ``op`` holds the Lease, or is in the peering object with another peer."""
    if way == "lease":
        lease = client.CoordinationV1Api(env.api).read_namespaced_lease(PEERING, "default")
        pid = op.proc.pid if op.proc is not None else None
        return lease.spec.holder_identity == f"{socket.gethostname()}_{pid}"
    peering = env.custom.get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", PEERING)
    return len(peering.get("status") or {}) >= 2


@scenarios.scenario("leader-failovers", "the acting one of two operator replicas stopped or "
                    "killed: time until the other makes a new mesh Ready, Lease against kopf peering")
def leader_failovers(ctx: scenarios.Context) -> dict[str, Any]:
    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    support.kubectl(env.cluster, "apply", "-f", str(ROOT / "crds" / "kopf-peering.yaml"))
    support.kubectl(env.cluster, "wait", "--for=condition=Established", "--timeout=60s",
                    "crd/clusterkopfpeerings.kopf.dev")
    env.custom.create_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", {
        "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": PEERING}})
    out: dict[str, Any] = {"failovers": args.failovers, "lease_seconds": 15}
    env.operator.stop()  # the environment's standalone operator steps aside
    try:
        for way in ("lease", "peering"):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                samples = []
                for i in range(args.failovers):
                    first = _replica(env, way, "first", 2)
                    name = f"{way}-{sig.name.lower()}-{i}"
                    support.create_mesh(env.custom, namespace, f"{name}-a")
                    wait(lambda n=f"{name}-a": ready_mesh(env, namespace, n), 120, "first acting")
                    second = _replica(env, way, "second", 1)
                    wait(lambda o=first, w=way: _acting(env, w, o), 120, "second waiting")
                    started = time.monotonic()
                    first.stop(sig)
                    support.create_mesh(env.custom, namespace, f"{name}-b")
                    wait(lambda n=f"{name}-b": ready_mesh(env, namespace, n), 180,
                         "second acting")
                    samples.append(time.monotonic() - started)
                    second.stop()
                    for mesh in ("a", "b"):
                        delete_mesh(env, namespace, f"{name}-{mesh}")
                figure = f"{way}_{sig.name.lower()}_to_new_mesh_ready_s"
                out[figure] = summary(samples)
                out[f"{figure}_samples"] = [round(x, 2) for x in samples]
    finally:
        env.operator.start()
    return out


# --- apiserver-restarts --------------------------------------------------------------------------

@scenarios.scenario("apiserver-restarts", "kube-apiserver SIGKILLed during a 12-proc reconcile: "
                    "duplicates, orphans, stuck")
def apiserver_restarts(ctx: scenarios.Context) -> dict[str, Any]:
    env, args = ctx.cluster(), ctx.args
    namespace = env.namespace()
    rng = random.Random(args.seed)
    size = 12
    after_back, restart_s = [], []
    totals = {"duplicates": 0, "orphans": 0, "stuck": 0}
    for i in range(args.apiserver_restarts):
        name = f"apis-{i}"
        support.create_mesh(env.custom, namespace, name, perHost=[{"name": "procs", "size": size}])
        target = rng.randrange(size)
        wait(lambda n=name, t=target: len(support.mesh_pods(env.core, namespace, n)) >= t,
             120, "pods appear")
        started = time.monotonic()
        env.cluster.stop_apiserver()
        env.cluster.start_apiserver()
        back = time.monotonic()
        restart_s.append(back - started)
        try:
            wait(lambda n=name: ready_mesh(env, namespace, n), args.stuck_after * 4, "Ready")
            after_back.append(time.monotonic() - back)
        except Timeout:
            totals["stuck"] += 1
        found = audit(env, namespace, name, size)
        totals["duplicates"] += found["duplicates"]
        totals["orphans"] += found["orphans"]
        delete_mesh(env, namespace, name)
    return {"restarts": args.apiserver_restarts, "procs": size, **totals,
            "mesh_ready_after_apiserver_back_s": summary(after_back),
            "baseline_apiserver_restart_s": summary(restart_s)}
