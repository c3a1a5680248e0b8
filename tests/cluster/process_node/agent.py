"""The process node's main loop: register the Node, heartbeat, watch bound pods, run workers.

Watches pods with ``fieldSelector=spec.nodeName=<node>`` (the only listing the Node authorizer
allows), hands each pod to a :class:`tests.cluster.process_node.pods.PodWorker`, and on SIGTERM
stops every pod's processes before exiting. Started by :mod:`tests.cluster.controlplane` as
``python -m tests.cluster.process_node <node folder>``.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests

from tests.cluster.process_node import addresses, api, dra, gpus, logserver, pods, registration
from tests.cluster.process_node.config import NodeConfig

Obj = dict[str, Any]


class Stop(Exception):
    """Raised in the main thread by SIGTERM/SIGINT to leave the watch."""


class Agent:
    """One node: its registration, heartbeat and pod workers."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.config = NodeConfig.load(folder / "node.json")
        self.api = api.Api(folder / "node.kubeconfig", folder / "credentials")
        devices = gpus.devices(self.config)
        self.ctx = pods.NodeContext(
            api=self.api, config=self.config, folder=folder,
            apiserver_port=urlparse(self.api.server).port or 443, devices=devices,
            allocator=gpus.Allocator(devices, self.config.gpu_replicas),
            pod_ips=addresses.PodIPs(self.config.pod_cidr),
        )
        self.workers: dict[str, pods.PodWorker] = {}
        self.pods_path = "/api/v1/pods"
        self.selector = f"spec.nodeName={self.config.name}"

    def start(self) -> None:
        self.logs = logserver.LogServer(self.config.host_ip, self.folder / "serving.crt",
                                        self.folder / "serving.key", self.api.ca_file, self.find_output,
                                        self.pod_ip)
        self.logs.start()
        version = self.api.get("/version")["gitVersion"]
        since = api.now()
        node = registration.register(self.api, self.config, version, since, self.logs.port)
        self.heartbeat = registration.Heartbeat(self.api, self.config, node["metadata"]["uid"], version,
                                                since, self.logs.port)
        self.heartbeat.renew()
        self.heartbeat.start()
        if self.config.dra and self.ctx.devices:
            dra.publish(self.api, self.config, self.ctx.devices, node["metadata"]["uid"])
        print(f"process node {self.config.name} registered; pods get {self.config.pod_cidr}", flush=True)

    # Pods...

    def pod_ip(self, namespace: str, name: str) -> str | None:
        """The IP of a running pod on this node (for port-forward)."""
        for worker in list(self.workers.values()):
            meta = worker.pod["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, name) and worker.pod_ip:
                return worker.pod_ip
        return None

    def find_output(self, namespace: str, name: str, container: str, previous: bool) -> tuple[Path, bool] | None:
        """The output file of a container's current (or previous) run, and whether it runs."""
        for worker in list(self.workers.values()):
            meta = worker.pod["metadata"]
            if (meta["namespace"], meta["name"]) != (namespace, name):
                continue
            for entry in worker.init_containers + worker.containers:
                if entry.name == container:
                    run = entry.runs - 1 if previous else entry.runs
                    if run < 1:
                        return None
                    return entry.log_path(run), entry.running and not previous
        files = sorted(self.folder.glob(f"pods/{namespace}_{name}_*/{container}-*.log"),
                       key=lambda p: (p.stat().st_mtime, int(p.stem.rsplit("-", 1)[1])))
        if len(files) < (2 if previous else 1):
            return None
        return files[-2] if previous else files[-1], False

    def dispatch(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if worker is not None and not worker.finished:
            worker.update(pod)
            return
        if worker is not None:
            del self.workers[uid]
        phase = (pod.get("status") or {}).get("phase")
        deleting = pod["metadata"].get("deletionTimestamp")
        if phase in ("Succeeded", "Failed") and not deleting:
            return  # finished before this agent started; nothing left to run
        worker = pods.PodWorker(self.ctx, pod)
        self.workers[uid] = worker
        worker.start()

    def forget(self, pod: Obj) -> None:
        worker = self.workers.pop(pod["metadata"]["uid"], None)
        if worker is not None:
            worker.removed()

    def sync(self) -> str:
        """List the node's pods, dispatch each, and return the list's resourceVersion."""
        listing = self.api.request("GET", self.pods_path, params={"fieldSelector": self.selector})
        seen = set()
        for pod in listing["items"]:
            seen.add(pod["metadata"]["uid"])
            self.dispatch(pod)
        for uid in [u for u in self.workers if u not in seen]:
            self.workers.pop(uid).removed()
        return str(listing["metadata"]["resourceVersion"])

    def watch(self) -> None:
        """List then watch, forever; re-list after any error or expiry."""
        while True:
            try:
                version = self.sync()
                for event in self.api.watch(self.pods_path, {"fieldSelector": self.selector,
                                                             "resourceVersion": version}):
                    kind, obj = event["type"], event["object"]
                    if kind in ("ADDED", "MODIFIED"):
                        self.dispatch(obj)
                    elif kind == "DELETED":
                        self.forget(obj)
                    elif kind == "ERROR":
                        break
            except (api.ApiError, requests.RequestException, ValueError) as error:
                print(f"watch: {error}; listing again", flush=True)
                time.sleep(1)

    def shutdown(self) -> None:
        for worker in self.workers.values():
            worker.shutdown()
        for worker in self.workers.values():
            worker.join(timeout=30)


def main(folder: Path) -> int:
    """Run the agent of the node kept in ``folder`` until SIGTERM."""

    def stop(signum: int, frame: object) -> None:
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    agent = Agent(folder)
    try:
        agent.start()
        agent.watch()
    except Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        agent.shutdown()
        print("process node stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
