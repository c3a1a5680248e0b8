"""The Node object and its heartbeat: what makes the scheduler see a process node.

:func:`node_object` and :func:`node_status` are pure renderings of a :class:`NodeConfig`
(capacity and allocatable with the GPU resource, GPU Feature Discovery labels, addresses,
conditions). :class:`Heartbeat` renews the ``kube-node-lease`` Lease every 10 s, as the kubelet
does (a failed renewal retried within seconds), and re-posts the Ready condition now and then,
and at once when the node controller has marked it otherwise. Used by :mod:`.agent`.
"""

from __future__ import annotations

import platform
import threading
from typing import Any

import requests

from tests.cluster.process_node import api as api_mod
from tests.cluster.process_node.config import NodeConfig

LEASE_SECONDS = 40
RENEW_SECONDS = 10
STATUS_SECONDS = 60
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 7.0


def gfd_labels(config: NodeConfig) -> dict[str, str]:
    """The labels NVIDIA GPU Feature Discovery sets (none on a node without GPUs, nor on a DRA
    node: there the GPUs are its ResourceSlice's, not the device plugin's)."""
    if config.gpus == 0 or config.dra:
        return {}
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(config.gpus),
        "nvidia.com/gpu.product": config.gpu_product,
        "nvidia.com/gpu.memory": str(config.gpu_memory_mib),
        "nvidia.com/gpu.replicas": str(config.gpu_replicas),
        "nvidia.com/gpu.sharing-strategy": "time-slicing" if config.gpu_replicas > 1 else "none",
    }


def node_object(config: NodeConfig) -> dict[str, Any]:
    """The Node as registered (metadata and spec)."""
    labels = {
        "kubernetes.io/hostname": config.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "procmesh.io/process-node": "true",
        **gfd_labels(config),
        **config.labels,
    }
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": config.name, "labels": labels},
        "spec": {"taints": [dict(t) for t in config.taints]} if config.taints else {},
    }


def resources(config: NodeConfig) -> dict[str, str]:
    """Capacity, which is also what is allocatable (nothing is reserved)."""
    found = {"cpu": config.cpu, "memory": config.memory, "pods": str(config.pods),
             "ephemeral-storage": "100Gi"}
    if config.gpus and not config.dra:
        found[config.gpu_resource] = str(config.gpus * config.gpu_replicas)
    return found


def node_status(config: NodeConfig, kubelet_version: str, stamp: str, since: str, port: int) -> dict[str, Any]:
    """The Node's status: Ready (heartbeat ``stamp``, true ``since``), resources, addresses, info,
    and ``port`` of the node's log endpoint (:mod:`.logserver`)."""

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": stamp, "lastTransitionTime": since}

    return {
        "capacity": resources(config),
        "allocatable": resources(config),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "no memory pressure"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
            condition("Ready", "True", "KubeletReady", "procmesh process node is posting ready status"),
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "addresses": [{"type": "InternalIP", "address": config.host_ip},
                      {"type": "Hostname", "address": config.name}],
        "nodeInfo": {
            "architecture": "amd64", "operatingSystem": "linux",
            "kubeletVersion": kubelet_version, "kubeProxyVersion": "",
            "containerRuntimeVersion": "procmesh://0.1",
            "kernelVersion": platform.release(), "osImage": "procmesh process node",
            "machineID": config.name, "systemUUID": config.name, "bootID": config.name,
        },
    }


def register(api: api_mod.Api, config: NodeConfig, kubelet_version: str, since: str,
             port: int) -> dict[str, Any]:
    """Create (or adopt) the Node and post its status; returns the Node."""
    body = node_object(config)
    try:
        node = api.create("/api/v1/nodes", body)
    except api_mod.ApiError as error:
        if error.status != 409:
            raise
        node = api.patch(f"/api/v1/nodes/{config.name}", {"metadata": {"labels": body["metadata"]["labels"]}})
    api.patch(f"/api/v1/nodes/{config.name}/status",
              {"status": node_status(config, kubelet_version, api_mod.now(), since, port)})
    return node


class Heartbeat(threading.Thread):
    """Renews the node's Lease every 10 s and re-posts the Ready condition every minute, or at
    once when the server shows it not Ready."""

    def __init__(self, api: api_mod.Api, config: NodeConfig, node_uid: str, kubelet_version: str,
                 since: str, port: int) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.api, self.config, self.node_uid = api, config, node_uid
        self.kubelet_version, self.since, self.port = kubelet_version, since, port
        self.stopping = threading.Event()

    def _lease(self) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": "kube-node-lease",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                              "name": self.config.name, "uid": self.node_uid}]},
            "spec": {"holderIdentity": self.config.name, "leaseDurationSeconds": LEASE_SECONDS,
                     "renewTime": api_mod.now_micro()},
        }

    def renew(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.config.name}"
        try:
            self.api.patch(path, {"spec": {"renewTime": api_mod.now_micro(),
                                           "holderIdentity": self.config.name,
                                           "leaseDurationSeconds": LEASE_SECONDS}},
                           content_type=api_mod.MERGE)
        except api_mod.ApiError as error:
            if error.status != 404:
                raise
            self.api.create("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", self._lease())

    def run(self) -> None:
        since_status = 0.0
        while not self.stopping.is_set():
            try:
                self._renew_until_done()
                since_status += RENEW_SECONDS
                if since_status >= STATUS_SECONDS or not self._ready_on_server():
                    since_status = 0.0
                    self.api.patch(f"/api/v1/nodes/{self.config.name}/status", {"status": node_status(
                        self.config, self.kubelet_version, api_mod.now(), self.since, self.port)})
            except (api_mod.ApiError, requests.RequestException) as error:
                print(f"heartbeat failed: {error}", flush=True)
            self.stopping.wait(RENEW_SECONDS)

    def _renew_until_done(self) -> None:
        """Renew the Lease, retrying a failure after 0.2 s, doubling to 7 s, as the kubelet's
        lease controller does: after an API server outage the node is heard again at once,
        not a whole renew interval later (the node controller's grace is short in tests)."""
        pause = RETRY_FIRST_SECONDS
        while True:
            try:
                self.renew()
                return
            except (api_mod.ApiError, requests.RequestException) as error:
                print(f"heartbeat failed (again in {pause:.1f} s): {error}", flush=True)
                if self.stopping.wait(pause):
                    return
                pause = min(pause * 2, RETRY_MAX_SECONDS)

    def _ready_on_server(self) -> bool:
        """Whether the Node's Ready condition is True. The node controller sets it Unknown when
        the lease went stale (during an outage, say); the kubelet's next status sync sets it back,
        as this one does, with a new transition time."""
        node = self.api.get(f"/api/v1/nodes/{self.config.name}")
        for c in (node.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") == "True":
                return True
        self.since = api_mod.now()
        return False
