"""A test cluster whose node is real: the control plane and the node inside one network namespace.

:class:`RealNodeCluster` is a :class:`tests.cluster.controlplane.Cluster` whose components run
in a namespace of its own (:mod:`.netns`): etcd, the controller manager and the scheduler on its
loopback as usual, the API server on every address of the namespace, advertising the node's
address so that the ``kubernetes`` Service (kube-proxy) leads pods to it. A relay (:mod:`.relay`)
listens on the same ports on 127.0.0.1 of the host, so the admin kubeconfig, the health checks and
the tests work unchanged from outside. :meth:`add_real_node` starts a :class:`.node.RealNode`;
:meth:`down` stops everything, unmounts, and removes the namespace.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import ssl
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from tests.cluster import binaries, components, controlplane, pki, processes
from tests.cluster.process_node import config as node_config
from tests.cluster.real_node import configs, images, netns, node, tunables

#: Marks a cluster folder as a real-node cluster (so `down` from the CLI removes the namespace).
MARKER = "real-node.json"
#: Where containerd's state and sockets go: /run is a tmpfs, and socket paths must stay short.
RUN_ROOT = Path("/run/procmesh")


def is_real(root: Path) -> bool:
    return (Path(root) / MARKER).exists()


def _flag_overrides(argv: list[str], values: dict[str, str]) -> list[str]:
    """``argv`` with each ``--flag=value`` of ``values`` replaced (or appended when absent)."""
    out, seen = [], set()
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if flag in values:
            out.append(f"{flag}={values[flag]}")
            seen.add(flag)
        else:
            out.append(arg)
    return out + [f"{f}={v}" for f, v in values.items() if f not in seen]


#: How the API server differs inside the namespace (every other flag as in components.apiserver).
APISERVER_FLAGS = {
    # Pods reach it through the `kubernetes` Service, at the node's address; still nothing but
    # the namespace's own addresses (loopback, the node's, the bridge's) can be bound.
    "--bind-address": "0.0.0.0",
    "--advertise-address": configs.NODE_IP,
    # The endpoint of the `kubernetes` Service is the advertised address (a real one here).
    "--endpoint-reconciler-type": "lease",
}


class RealNodeCluster(controlplane.Cluster):
    """A control plane in a network namespace of its own, with real nodes beside it."""

    def __init__(self, root: Path | None = None) -> None:
        super().__init__(root)
        self.netns = netns.name_for(self.root)

    @property
    def real_nodes_dir(self) -> Path:
        return self.root / "real-nodes"

    def _run_dir(self) -> Path:
        return RUN_ROOT / self.netns

    # Starting...

    def up(self, nodes: Iterable[node_config.NodeConfig] = (),
           real_nodes: tuple[str, ...] = ("node-0",)) -> None:
        """Start the namespace, the control plane in it and the relay, then ``real_nodes``."""
        if self.running():
            raise controlplane.ClusterError(f"a cluster already runs in {self.root}: run `down` first")
        records = images.built()
        absent = [n for n in node.IMPORTED if n not in records]
        if absent:
            raise controlplane.ClusterError(
                f"images {', '.join(absent)} are not built for the current sources: run "
                "`python -m tests.cluster images` first")
        missing = binaries.missing(binaries.NODE)
        if missing:
            binaries.path(missing[0])
        netns.create(self.netns, configs.NODE_IP, components.SERVICE_CIDR)
        try:
            super().up(nodes)
            for name in real_nodes:
                self.add_real_node(name, records)
        except BaseException:
            self.down()
            raise

    def _write_credentials(self, ports: components.Ports) -> None:
        super()._write_credentials(ports)
        (self.root / MARKER).write_text(json.dumps({"netns": self.netns}, indent=2))
        # The apiserver's certificate also names the node's address (the `kubernetes` endpoint).
        ca = pki.KeyPair(self.layout.pki / "ca.crt", self.layout.pki / "ca.key")
        pki.make_cert(ca, self.layout.pki, "apiserver", "kube-apiserver",
                      sans=(*pki.APISERVER_SANS, f"IP:{configs.NODE_IP}"), server=True)
        self._start_relay(ports)

    def _start_relay(self, ports: components.Ports) -> None:
        argv = [sys.executable, "-m", "tests.cluster.real_node.relay", str(netns.path(self.netns)),
                *(str(p) for p in dataclasses.astuple(ports))]
        repo = Path(__file__).resolve().parents[3]
        processes.spawn(argv, self.layout.run / "relay.pid", self.layout.logs / "relay.log", cwd=repo)

    def _start(self, name: str, argv: list[str]) -> None:
        if name == "kube-apiserver":
            argv = _flag_overrides(argv, APISERVER_FLAGS)
        super()._start(name, [*netns.enter(self.netns), *argv])

    def add_real_node(self, name: str, records: dict[str, dict[str, str]] | None = None) -> node.RealNode:
        """Start a real node and wait until it is Ready."""
        if list(self.real_nodes_dir.glob("*/node.json")):
            raise controlplane.ClusterError(
                "this cluster has a real node already; one real node per cluster is supported "
                "(its namespace holds one kubelet and one kube-proxy)")
        spec = self._spec(name)
        spec.folder.mkdir(parents=True, exist_ok=True)
        (spec.folder / "node.json").write_text(json.dumps({"name": name}))
        real = node.RealNode(spec, self.netns)
        ca = pki.KeyPair(self.layout.pki / "ca.crt", self.layout.pki / "ca.key")
        real.start(ca, self.server, records if records is not None else images.built())
        self._wait_real_ready(real)
        return real

    def _spec(self, name: str) -> configs.NodeSpec:
        return configs.NodeSpec(
            name=name, folder=self.real_nodes_dir / name, run_dir=self._run_dir() / name,
            bin_dir=binaries.bin_dir(), ca_cert=self.layout.pki / "ca.crt",
            cgroup=f"{self.netns}-{name}", sandbox_image=images.images()[-1].ref,
            service_cidr=components.SERVICE_CIDR,
        )

    def real_nodes(self) -> list[node.RealNode]:
        return [node.RealNode(self._spec(p.parent.name), self.netns)
                for p in sorted(self.real_nodes_dir.glob("*/node.json"))]

    def _wait_real_ready(self, real: node.RealNode, timeout: float = node.START_TIMEOUT) -> None:
        ca = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        ca.load_cert_chain(str(self.layout.pki / "admin.crt"), str(self.layout.pki / "admin.key"))
        deadline = time.monotonic() + timeout
        while True:
            real.check_alive()
            body = controlplane._http_json(f"{self.server}/api/v1/nodes/{real.spec.name}", ca)
            conditions = (body or {}).get("status", {}).get("conditions", [])
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return
            if time.monotonic() > deadline:
                raise controlplane.ClusterError(
                    f"real node {real.spec.name} not Ready after {timeout:.0f} s; conditions: {conditions}")
            time.sleep(0.5)

    # Stopping...

    def down(self) -> None:
        """Stop the real nodes (every process, mount and cgroup), the control plane, the relay,
        and remove the namespace."""
        errors = []
        for real in self.real_nodes() if self.real_nodes_dir.exists() else []:
            try:
                real.stop()
            except RuntimeError as error:
                errors.append(str(error))
        super().down()
        processes.stop_pidfiles([self.layout.run / "relay.pid"], grace=5)
        netns.delete(self.netns)
        shutil.rmtree(self._run_dir(), ignore_errors=True)
        others = [p for p in netns.NETNS_DIR.glob(f"{netns.PREFIX}*")] if netns.NETNS_DIR.exists() else []
        tunables.restore(other_nodes_running=bool(others))
        if errors:
            raise controlplane.ClusterError("; ".join(errors))
