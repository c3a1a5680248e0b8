"""One pod's life on a process node: set up, run containers, report status, terminate.

A :class:`PodWorker` thread per pod: it reports unsupported fields, takes a pod IP and GPUs,
writes the volumes, starts each container through :mod:`.containers` with the env of
:mod:`.environment` (plus the emulated NVIDIA runtime of :mod:`.gpus`), patches the status of
:mod:`.status` whenever it changes, and on deletion stops the processes (SIGTERM, SIGKILL after the
grace period) and confirms the deletion. Created by :mod:`.agent`, which feeds it pod updates.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import requests

from tests.cluster.process_node import (
    addresses,
    api,
    containers,
    dra,
    environment,
    gpus,
    registration,
    status,
    support,
    volumes,
)
from tests.cluster.process_node.config import NodeConfig

Obj = dict[str, Any]
TICK_SECONDS = 0.2
#: Host variables a container keeps: what a Python process needs to import our code and run.
INHERITED_ENV = ("PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "VIRTUAL_ENV",
                 "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclasses.dataclass
class NodeContext:
    """What every pod worker of one node shares."""

    api: api.Api
    config: NodeConfig
    folder: Path
    apiserver_port: int
    devices: list[gpus.Device]
    allocator: gpus.Allocator
    pod_ips: addresses.PodIPs

    @property
    def allocatable(self) -> dict[str, str]:
        return registration.resources(self.config)


def base_env(ctx: NodeContext, pod: Obj) -> dict[str, str]:
    """The environment every container starts from, before the pod's own ``env``."""
    host_path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    port = str(ctx.apiserver_port)
    env.update({
        # `python` is the node's interpreter: the image is ignored, the current environment used.
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), host_path]),
        "HOME": os.environ.get("HOME", "/root"),
        "HOSTNAME": pod["spec"].get("hostname") or pod["metadata"]["name"],
        # In-cluster config: the apiserver listens on loopback, not on the Service's ClusterIP.
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://127.0.0.1:{port}",
    })
    return env


def gpu_units(container: Obj, resource: str) -> int:
    """How many units of the node's GPU resource ``container`` asks for."""
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(resource) or (resources.get("requests") or {}).get(resource)
    return int(value or 0)


class PodWorker(threading.Thread):
    """Runs one pod until it is deleted (or the node stops)."""

    def __init__(self, ctx: NodeContext, pod: Obj) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.ctx, self.pod = ctx, pod
        self.uid = meta["uid"]
        self.path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        self.dir = ctx.folder / "pods" / f"{meta['namespace']}_{meta['name']}_{self.uid[:8]}"
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self.gone = False          # the object no longer exists in the API
        self.shutting_down = False  # the node stops; leave the pod object alone
        self.finished = False
        self.containers: list[containers.Container] = []
        self.init_containers: list[containers.Container] = []
        self.volume_dirs: dict[str, Path] | None = None
        self.allocated: dict[str, list[gpus.Device]] = {}
        self.pod_ip = ""
        self.unsupported: list[str] = []
        self.sent: Obj | None = None
        self.start_time = api.now()

    # Inputs from the agent...

    def update(self, pod: Obj) -> None:
        with self._lock:
            self.pod = pod
        self.wake()

    def removed(self) -> None:
        self.gone = True
        self.wake()

    def shutdown(self) -> None:
        self.shutting_down = True
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def notify(self, reason: str, message: str, kind: str = "Normal") -> None:
        self.ctx.api.event(self.pod, self.ctx.config.name, reason, message, kind)

    # The loop...

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # noqa: BLE001 - a broken pod must not take the node down
            print(f"{self.name}: crashed:\n{traceback.format_exc()}", flush=True)
            self._stop_containers(grace=2)
        finally:
            self._release()
            self.finished = True

    def _run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.unsupported = support.unsupported(self.pod)
        if self.unsupported:
            self.notify(support.REASON, "; ".join(self.unsupported), "Warning")
        if self.pod["spec"].get("hostNetwork"):
            self.pod_ip = self.ctx.config.host_ip  # as the kubelet does: the pod IP is the node's
        else:
            self.pod_ip = self.ctx.pod_ips.acquire(self.uid)
        backoff = containers.Backoff(self.ctx.config.backoff_initial_seconds,
                                     self.ctx.config.backoff_max_seconds)
        for spec in self.pod["spec"].get("initContainers") or []:
            self.init_containers.append(containers.Container(
                spec, self.pod, self.dir, self.pod_ip, backoff, self.notify, self.wake, init=True))
        for spec in self.pod["spec"]["containers"]:
            self.containers.append(containers.Container(
                spec, self.pod, self.dir, self.pod_ip, backoff, self.notify, self.wake))
        while True:
            if self.gone or self.shutting_down:
                self._stop_containers(grace=2 if self.gone else 5)
                return
            if self.pod["metadata"].get("deletionTimestamp"):
                self._terminate()
                return
            pending = next((c for c in self.init_containers if not c.succeeded), None)
            if pending is not None:
                # Init containers run one at a time, in order, each to success.
                pending.tick(functools.partial(self._launch, pending))
                initialized = False
            else:
                initialized = True
                for container in self.containers:
                    container.tick(functools.partial(self._launch, container))
            self._report(initialized)
            if all(c.done for c in self.containers) or (pending is not None and pending.done):
                self._release()
            self._wake.wait(TICK_SECONDS)
            self._wake.clear()

    # Setting a container up...

    def _lookup(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.ctx.api.get(f"/api/v1/namespaces/{namespace}/{kind}/{name}")  # type: ignore[no-any-return]

    def _token(self, audience: str | None, expiration: int) -> str:
        meta = self.pod["metadata"]
        account = self.pod["spec"].get("serviceAccountName") or "default"
        spec: Obj = {"expirationSeconds": max(expiration, 600),
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": self.uid}}
        if audience:
            spec["audiences"] = [audience]
        answer = self.ctx.api.create(
            f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        return str(answer["status"]["token"])

    def _launch(self, container: containers.Container) -> containers.Launch | None:
        """Resolve what a run of ``container`` executes, or mark it waiting and return None."""
        pod, spec = self.pod, container.spec
        try:
            if self.volume_dirs is None:
                self.volume_dirs = volumes.materialize(
                    pod, self.dir, lookup=self._lookup, token=self._token, pod_ip=self.pod_ip,
                    host_ip=self.ctx.config.host_ip, allocatable=self.ctx.allocatable)
            env = environment.container_env(
                pod, spec, pod_ip=self.pod_ip, host_ip=self.ctx.config.host_ip, lookup=self._lookup,
                allocatable=self.ctx.allocatable, base=base_env(self.ctx, pod))
            self._apply_gpus(container.name, spec, env)
            argv = [environment.expand(a, env) for a in (spec.get("command") or []) + (spec.get("args") or [])]
            if not argv:
                raise environment.ConfigError(
                    "no command or args: the process node ignores images, so it has nothing to run")
            mounts = volumes.mounts(spec, self.volume_dirs)
        except (environment.ConfigError, gpus.DeviceError, api.ApiError, requests.RequestException) as error:
            reason = "ContainerCreating" if self.volume_dirs is None else "CreateContainerConfigError"
            if isinstance(error, gpus.DeviceError):
                reason = "RunContainerError"
            if container.state.get("waiting", {}).get("message") != str(error):
                self.notify("FailedMount" if self.volume_dirs is None else "Failed", str(error), "Warning")
            container.fail_config(reason, str(error))
            return None
        return containers.Launch(argv, env, spec.get("workingDir"), mounts)

    def _get_claim(self, namespace: str, name: str) -> Obj | None:
        return self.ctx.api.get(  # type: ignore[no-any-return]
            f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}")

    def _apply_gpus(self, name: str, spec: Obj, env: dict[str, str]) -> None:
        """The device plugin's allocation (or the DRA driver's claimed devices), then the NVIDIA
        runtime's view of it."""
        claimed = dra.claimed_devices(self.pod, spec, self.ctx.config.name, self.ctx.devices,
                                      self._get_claim) if self.ctx.config.dra else None
        if claimed is not None:
            # What the driver's CDI spec does: the node, not the pod, names the devices.
            env["NVIDIA_VISIBLE_DEVICES"] = gpus.visible_devices_value(claimed) or "void"
        units = gpu_units(spec, self.ctx.config.gpu_resource)
        if units and name not in self.allocated:
            self.allocated[name] = self.ctx.allocator.allocate(self.uid, name, units)
        if units and "NVIDIA_VISIBLE_DEVICES" not in env:  # a pod's own value wins
            env["NVIDIA_VISIBLE_DEVICES"] = gpus.visible_devices_value(self.allocated[name])
        env["CUDA_VISIBLE_DEVICES"] = gpus.host_cuda_visible_devices(
            env.get("NVIDIA_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES"), self.ctx.devices)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

    # Status...

    def _report(self, initialized: bool = True) -> None:
        statuses = [c.status() for c in self.containers]
        if not initialized:
            for entry in statuses:
                entry["state"] = {"waiting": {"reason": "PodInitializing"}}
        computed = status.compute(
            self.pod, statuses, pod_ip=self.pod_ip,
            host_ip=self.ctx.config.host_ip, start_time=self.start_time,
            unsupported=self.unsupported, now=api.now(),
            init_statuses=[c.status() for c in self.init_containers])
        if computed == self.sent:
            return
        body = {"metadata": {"uid": self.uid}, "status": status.strategic(computed)}
        try:
            self.ctx.api.patch(self.path + "/status", body)
            self.sent = computed
        except api.ApiError as error:
            if error.status in (404, 409):  # gone, or replaced by a pod of the same name
                self.gone = True
            else:
                print(f"{self.name}: status patch failed: {error}", flush=True)
        except requests.RequestException as error:
            print(f"{self.name}: status patch failed: {error}", flush=True)

    # Stopping...

    def _stop_containers(self, grace: float) -> None:
        every = self.init_containers + self.containers
        for container in every:
            container.signal_stop()
        deadline = time.monotonic() + grace
        while any(c.running for c in every):
            if time.monotonic() > deadline:
                for container in every:
                    container.kill()
            for container in every:
                container.tick(lambda: None)
            time.sleep(0.05)

    def _terminate(self) -> None:
        """Graceful deletion: SIGTERM, SIGKILL after the grace period, then remove the object."""
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        if any(c.running for c in self.init_containers + self.containers):
            self.notify("Killing", "Stopping containers", "Normal")
        self._stop_containers(float(grace))
        self._report()
        try:
            self.ctx.api.delete(self.path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                            "preconditions": {"uid": self.uid}})
        except api.ApiError as error:
            if error.status not in (404, 409):
                print(f"{self.name}: delete failed: {error}", flush=True)

    def _release(self) -> None:
        self.ctx.allocator.release(self.uid)
        self.ctx.pod_ips.release(self.uid)
