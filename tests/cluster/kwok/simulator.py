"""Run KWOK against a test cluster: the controller process and the fake nodes it manages.

:func:`start` spawns ``kwok`` (built by :mod:`.build`) with the cluster's admin kubeconfig and
the default Stages, managing only nodes annotated :data:`NODE_ANNOTATION`; its pid file and log
sit beside the control plane's, so :meth:`tests.cluster.controlplane.Cluster.down` stops it too.
:func:`add_nodes` creates fake Node objects (tainted :data:`TAINT_KEY`, labelled
:data:`NODE_LABEL`, so only pods that tolerate the taint and select the label go there) and waits
until KWOK reports them Ready. Pod IPs come from :data:`POD_CIDR`, a loopback range: no address
KWOK hands out routes off the machine (nothing listens there; a connection is refused at once).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.cluster import controlplane, processes
from tests.cluster.kwok import build

#: KWOK manages the nodes with this annotation (``--manage-nodes-with-annotation-selector``).
NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
#: Fake nodes carry this taint (NoSchedule) and this label, so nothing lands there by accident.
TAINT_KEY = "kwok.x-k8s.io/node"
NODE_LABEL = "type"
NODE_LABEL_VALUE = "kwok"
#: Where pod IPs come from (``--cidr``), and the fake nodes' InternalIP (``--node-ip``).
POD_CIDR = "127.250.0.1/16"
NODE_IP = "127.249.0.1"
PID_FILE = "kwok.pid"
START_TIMEOUT = 120.0


def toleration() -> dict[str, Any]:
    """The toleration a pod template needs to run on a fake node."""
    return {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def node_selector() -> dict[str, str]:
    """The node selector that keeps a pod template on fake nodes."""
    return {NODE_LABEL: NODE_LABEL_VALUE}


def argv(cluster: controlplane.Cluster) -> list[str]:
    """The controller's command line for ``cluster`` (a pure function of its layout)."""
    folder = build.cache_dir()
    return [
        str(folder / build.BINARY),
        f"--kubeconfig={cluster.kubeconfig}",
        f"--config={folder / build.STAGES}",
        f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        # The node-heartbeat-with-lease stage renews each node's Lease at this duration.
        "--node-lease-duration-seconds=40",
    ]


def running(cluster: controlplane.Cluster) -> bool:
    return processes.read_pidfile(cluster.layout.run / PID_FILE) is not None


def start(cluster: controlplane.Cluster) -> None:
    """Start the controller for ``cluster`` unless it runs already; build KWOK first if needed."""
    if running(cluster):
        return
    build.ensure()
    processes.spawn(argv(cluster), cluster.layout.run / PID_FILE, log_path(cluster))


def stop(cluster: controlplane.Cluster) -> None:
    processes.stop_pidfiles([cluster.layout.run / PID_FILE], grace=5)


def log_path(cluster: controlplane.Cluster) -> Path:
    return cluster.layout.logs / "kwok.log"


def render_node(name: str, *, pods: int = 110, cpu: str = "32", memory: str = "256Gi") -> dict[str, Any]:
    """A fake Node: annotated for KWOK, tainted and labelled so only chosen pods go there."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: NODE_ANNOTATION_VALUE},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", NODE_LABEL: NODE_LABEL_VALUE},
        },
        "spec": {"taints": [{"key": TAINT_KEY, "value": NODE_ANNOTATION_VALUE,
                             "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def add_nodes(cluster: controlplane.Cluster, names: Sequence[str], *, pods: int = 110,
              timeout: float = START_TIMEOUT) -> None:
    """Create fake nodes ``names`` (skipping those that exist) and wait until all are Ready;
    the controller must run (:func:`start`)."""
    context = _admin_context(cluster)
    for name in names:
        try:
            _request(cluster.server + "/api/v1/nodes", context, "POST",
                     render_node(name, pods=pods))
        except urllib.error.HTTPError as e:
            if e.code != 409:  # AlreadyExists
                raise
    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting:
        if not running(cluster):
            raise controlplane.ClusterError(
                f"kwok exited; the end of {log_path(cluster)}:\n{_tail(log_path(cluster))}")
        listed = _request(cluster.server + "/api/v1/nodes?labelSelector="
                          f"{NODE_LABEL}%3D{NODE_LABEL_VALUE}", context)
        waiting -= {n["metadata"]["name"] for n in listed.get("items") or [] if _ready(n)}
        if waiting and time.monotonic() > deadline:
            raise controlplane.ClusterError(
                f"{len(waiting)} fake nodes not Ready after {timeout:.0f} s (e.g. "
                f"{sorted(waiting)[0]}); the end of {log_path(cluster)}:\n{_tail(log_path(cluster))}")
        if waiting:
            time.sleep(0.2)


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _admin_context(cluster: controlplane.Cluster) -> ssl.SSLContext:
    pki = cluster.layout.pki
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def _request(url: str, context: ssl.SSLContext, method: str = "GET",
             body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
