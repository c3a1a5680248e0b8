"""Start, watch and stop one test cluster: etcd, the three control-plane components, process nodes.

A :class:`Cluster` owns a folder (see :class:`tests.cluster.components.Layout`). ``up`` generates
the certificates and kubeconfigs, starts each component detached, waits until each is healthy,
then starts the process nodes and waits until they are Ready. ``down`` stops everything, the pods'
processes included. Nothing listens beyond 127.0.0.0/8. Driven by ``python -m tests.cluster`` and
by the ``cluster`` pytest fixture.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tests.cluster import binaries, components, device_classes, kubeconfigs, pki, processes
from tests.cluster.process_node import config as node_config
from tests.cluster.process_node import slots

#: The folder ``python -m tests.cluster`` uses unless $PROCMESH_CLUSTER_DIR names another.
DEFAULT_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "procmesh-cluster"
DIR_ENV = "PROCMESH_CLUSTER_DIR"

#: Start order; stopped in reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

START_TIMEOUT = 120.0
#: Restarts of kube-apiserver tried while its port is still taken (see start_apiserver).
APISERVER_RESTART_ATTEMPTS = 40


class ClusterError(RuntimeError):
    """A component failed to start or become healthy; the message quotes its log."""


def default_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)


#: How many times :meth:`Cluster.up` picks new ports when one was taken before its component bound it.
PORT_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Cluster:
    """One local control plane and its process nodes, kept in ``root``. ``gang`` serves the
    Workload/PodGroup API and gang scheduling (:data:`components.GANG_FEATURE_GATES`);
    ``emulate`` names an older Kubernetes minor version the components behave as (for example
    :data:`components.EMULATE_BEFORE_DRA`; the gang gates do not exist there, so not with
    ``gang``)."""

    def __init__(self, root: Path | None = None, *, gang: bool = True,
                 emulate: str | None = None) -> None:
        if gang and emulate:
            raise ValueError("gang needs Kubernetes 1.36's gates: use gang=False with emulate")
        self.layout = components.Layout(Path(root) if root else default_dir())
        self.gang = gang
        self.emulate = emulate

    # Reading the state...

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user in group system:masters)."""
        return self.layout.admin_kubeconfig

    @property
    def ports(self) -> components.Ports:
        return components.Ports(**json.loads(self.layout.state.read_text())["ports"])

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def running(self) -> bool:
        """Whether this folder's apiserver process is alive."""
        return processes.read_pidfile(self.layout.run / "kube-apiserver.pid") is not None

    def nodes(self) -> list[node_config.NodeConfig]:
        """The process nodes configured in this cluster."""
        return [node_config.NodeConfig.load(p) for p in sorted(self.layout.nodes.glob("*/node.json"))]

    # Starting...

    def up(self, nodes: Iterable[node_config.NodeConfig] = ()) -> None:
        """Start the control plane (fresh state) and ``nodes``; return once all are healthy.

        Ports are picked free just before the components bind them, so another process can take
        one in between (clusters start side by side in the test workers): a component that
        exits with ``address already in use`` makes the whole start run again on new ports,
        at most :data:`PORT_ATTEMPTS` times."""
        nodes = list(nodes)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._up_once(nodes)
                return
            except ClusterError as error:
                if "address already in use" not in str(error) or attempt == PORT_ATTEMPTS:
                    raise

    def _up_once(self, nodes: list[node_config.NodeConfig]) -> None:
        if self.running():
            raise ClusterError(f"a cluster already runs in {self.root}: run `down` first")
        absent = binaries.missing(binaries.CONTROL_PLANE)
        if absent:
            binaries.path(absent[0])  # raises with the fix in the message
        if self.root.exists():
            shutil.rmtree(self.root)
        for folder in (self.root, self.layout.pki, self.layout.logs, self.layout.run, self.layout.nodes):
            folder.mkdir(parents=True, exist_ok=True)
        ports = components.Ports(free_port(), free_port(), free_port(), free_port())
        self.layout.state.write_text(json.dumps({"ports": dataclasses.asdict(ports),
                                                 "gang": self.gang, "emulate": self.emulate},
                                                indent=2))
        try:
            self._write_credentials(ports)
            self._start("etcd", components.etcd(binaries.path("etcd"), self.layout, ports))
            self._wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{ports.etcd}/health"), port=ports.etcd)
            self._start("kube-apiserver", components.apiserver(
                binaries.path("kube-apiserver"), self.layout, ports, self.gang, self.emulate))
            ca = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
            self._wait("kube-apiserver",
                       lambda: _http_ok(f"https://127.0.0.1:{ports.apiserver}/readyz", ca),
                       port=ports.apiserver)
            self._start("kube-controller-manager", components.controller_manager(
                binaries.path("kube-controller-manager"), self.layout, ports, self.gang,
                self.emulate))
            (self.root / "scheduler.yaml").write_text(components.scheduler_config(self.layout))
            self._start("kube-scheduler",
                        components.scheduler(binaries.path("kube-scheduler"), self.layout, ports,
                                             self.gang, self.emulate))
            insecure = ssl.create_default_context()
            insecure.check_hostname = False
            insecure.verify_mode = ssl.CERT_NONE  # self-signed serving certs of KCM and scheduler
            self._wait("kube-controller-manager", lambda: _http_ok(
                f"https://127.0.0.1:{ports.controller_manager}/healthz", insecure),
                port=ports.controller_manager)
            self._wait("kube-scheduler", lambda: _http_ok(
                f"https://127.0.0.1:{ports.scheduler}/healthz", insecure), port=ports.scheduler)
            # Pods cannot be created in a namespace before its `default` service account exists.
            self._wait("kube-controller-manager", self._default_service_account_exists)
            for node in nodes:
                self.add_node(node)
        except BaseException:
            self.down()
            raise

    def _write_credentials(self, ports: components.Ports) -> None:
        folder = self.layout.pki
        ca = pki.make_ca(folder)
        pki.make_cert(ca, folder, "apiserver", "kube-apiserver", sans=pki.APISERVER_SANS, server=True)
        pki.make_service_account_keys(folder)
        # The apiserver's identity towards process nodes (kubectl logs goes through it).
        pki.make_cert(ca, folder, "apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                      organization="system:masters")
        server = f"https://127.0.0.1:{ports.apiserver}"
        admin = pki.make_cert(ca, folder, "admin", "procmesh-admin", organization="system:masters")
        kubeconfigs.write(self.kubeconfig, server, ca.cert, admin, "procmesh-admin")
        for component, user in (("controller-manager", "system:kube-controller-manager"),
                                ("scheduler", "system:kube-scheduler")):
            pair = pki.make_cert(ca, folder, component, user)
            kubeconfigs.write(self.layout.kubeconfig(component), server, ca.cert, pair, user)

    def _start(self, name: str, argv: list[str]) -> None:
        processes.spawn(argv, self.layout.run / f"{name}.pid", self.layout.logs / f"{name}.log")

    def _wait(self, name: str, check: Callable[[], bool], timeout: float = START_TIMEOUT,
              port: int | None = None) -> None:
        """Until ``check`` passes and (with ``port``) the component itself listens on ``port``."""
        pidfile = self.layout.run / f"{name}.pid"
        log = self.layout.logs / f"{name}.log"
        deadline = time.monotonic() + timeout

        def healthy() -> bool:
            pid = processes.read_pidfile(pidfile)
            return check() and (port is None or (pid is not None and processes.listens_on(pid, port)))

        while not healthy():
            if processes.read_pidfile(pidfile) is None:
                raise ClusterError(f"{name} exited while starting; the end of {log}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{name} not healthy after {timeout:.0f} s; the end of {log}:\n{_tail(log)}")
            time.sleep(0.1)

    def _default_service_account_exists(self) -> bool:
        ca = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        ca.load_cert_chain(str(self.layout.pki / "admin.crt"), str(self.layout.pki / "admin.key"))
        return _http_ok(f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", ca)

    # Process nodes...

    def add_node(self, node: node_config.NodeConfig, wait: bool = True) -> node_config.NodeConfig:
        """Start a process node (its own agent process); by default wait until it is Ready."""
        # The slot (addresses, pod range) is unique on the machine, not only in this cluster.
        if node.index < 0:
            index, slot = slots.reserve()
            node = dataclasses.replace(node, index=index)
        else:
            held = slots.try_reserve(node.index)
            if held is None:
                raise ClusterError(f"node slot {node.index} is held by a running process node")
            slot = held
        folder = self.layout.nodes / node.name
        if folder.exists():
            raise ClusterError(f"node {node.name!r} exists already")
        folder.mkdir(parents=True)
        (folder / "node.json").write_text(node.to_json())
        ca = pki.KeyPair(self.layout.pki / "ca.crt", self.layout.pki / "ca.key")
        pair = pki.make_cert(ca, folder, "node", f"system:node:{node.name}", organization="system:nodes")
        kubeconfigs.write(folder / "node.kubeconfig", self.server, ca.cert, pair, f"system:node:{node.name}")
        # The serving certificate of the node's log endpoint, verified by the apiserver.
        pki.make_cert(ca, folder, "serving", f"system:node:{node.name}", organization="system:nodes",
                      sans=(f"IP:{node.host_ip}",), server=True)
        argv = [sys.executable, "-m", "tests.cluster.process_node", str(folder)]
        env = dict(os.environ)
        # The agent runs from the repository root so `tests.cluster` imports in its pods' Python too.
        repo = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH")) if p)
        try:
            processes.spawn(argv, folder / "agent.pid", folder / "agent.log", env=env, cwd=repo,
                            pass_fds=(slot,))
        finally:
            os.close(slot)  # the agent holds the slot from here on, until it exits
        if node.dra:
            device_classes.ensure(self.server, self._admin_context())
        if wait:
            self.wait_node_ready(node.name)
        return node

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        context.load_cert_chain(str(self.layout.pki / "admin.crt"), str(self.layout.pki / "admin.key"))
        return context

    def wait_node_ready(self, name: str, timeout: float = START_TIMEOUT) -> None:
        folder = self.layout.nodes / name
        ca = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        ca.load_cert_chain(str(self.layout.pki / "admin.crt"), str(self.layout.pki / "admin.key"))

        def ready() -> bool:
            if processes.read_pidfile(folder / "agent.pid") is None:
                raise ClusterError(f"process node {name} exited; the end of its log:\n{_tail(folder / 'agent.log')}")
            body = _http_json(f"{self.server}/api/v1/nodes/{name}", ca)
            conditions = (body or {}).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ClusterError(f"node {name} not Ready after {timeout:.0f} s")
            time.sleep(0.1)

    def stop_node(self, name: str) -> None:
        """Stop a process node's agent and every process of its pods (the Node object stays)."""
        folder = self.layout.nodes / name
        processes.stop_pidfiles([folder / "agent.pid"], grace=15)
        # Whatever the agent could not stop (it was killed, say): the containers' pid files.
        processes.stop_pidfiles(folder.glob("pods/*/*.pid"), grace=2)

    def kill_node(self, name: str) -> None:
        """A node dies: SIGKILL its agent and every process of its pods, with no grace and no
        word to the API server (the Node object and its pods stay, as on a lost machine)."""
        folder = self.layout.nodes / name
        processes.kill_pidfiles([folder / "agent.pid"])
        processes.kill_pidfiles(folder.glob("pods/*/*.pid"))

    @contextlib.contextmanager
    def nodes_silenced(self) -> Iterator[list[str]]:
        """Every running process node falls silent (its agent SIGSTOPped: no lease renewal, no
        status; its pods run on), as when the nodes are cut off from the control plane; yields
        their names. On exit they are heard again; returns once each is Ready."""
        stopped: list[tuple[str, int]] = []
        for node in self.nodes():
            pid = processes.read_pidfile(self.layout.nodes / node.name / "agent.pid")
            if pid is not None:
                os.kill(pid, signal.SIGSTOP)
                stopped.append((node.name, pid))
        try:
            yield [name for name, _ in stopped]
        finally:
            for _, pid in stopped:
                os.kill(pid, signal.SIGCONT)
        for name, _ in stopped:
            self.wait_node_ready(name)

    # The API server...

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (SIGKILL: no graceful drain); etcd keeps the state."""
        processes.kill_pidfiles([self.layout.run / "kube-apiserver.pid"])

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on its port, with the same flags; wait until ready."""
        if processes.read_pidfile(self.layout.run / "kube-apiserver.pid") is not None:
            raise ClusterError("kube-apiserver is running already: stop_apiserver() first")
        ports = self.ports
        ca = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        log = self.layout.logs / "kube-apiserver.log"
        for attempt in range(APISERVER_RESTART_ATTEMPTS):
            offset = log.stat().st_size if log.exists() else 0
            state = json.loads(self.layout.state.read_text())
            self._start("kube-apiserver", components.apiserver(
                binaries.path("kube-apiserver"), self.layout, ports, bool(state.get("gang", True)),
                state.get("emulate")))
            try:
                self._wait("kube-apiserver",
                           lambda: _http_ok(f"https://127.0.0.1:{ports.apiserver}/readyz", ca))
                return
            except ClusterError:
                with open(log, "rb") as f:
                    f.seek(offset)
                    in_use = b"address already in use" in f.read()
                # Its port was free for a moment: any process's outgoing connection may have
                # taken it as an ephemeral port. Those are short-lived: try again.
                if not in_use or attempt == APISERVER_RESTART_ATTEMPTS - 1:
                    raise
                time.sleep(0.5)

    # Stopping...

    def down(self) -> None:
        """Stop the process nodes, their pods and the control plane; keep the folder (logs)."""
        if self.layout.nodes.exists():
            for folder in sorted(self.layout.nodes.iterdir()):
                self.stop_node(folder.name)
        # KWOK's controller (tests/cluster/kwok/simulator.py), when a scale run started one.
        processes.stop_pidfiles([self.layout.run / "kwok.pid"], grace=5)
        for name in reversed(COMPONENTS):
            processes.stop_pidfiles([self.layout.run / f"{name}.pid"], grace=10)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _http_json(url: str, context: ssl.SSLContext) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]
    except (urllib.error.URLError, OSError, ValueError):
        return None
