"""Command lines of the control-plane components: pure functions of the cluster layout.

Every listener is on 127.0.0.1. Flag choices follow shared/research/control-plane.md §3.2; the
reasons for the non-obvious ones are in comments. :mod:`tests.cluster.controlplane` runs them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

#: The service range only names ClusterIPs; nothing routes to it (there is no kube-proxy).
SERVICE_CIDR = "10.96.0.0/16"

#: Gang scheduling (Kubernetes 1.36, alpha): the Workload/PodGroup API and the scheduler's
#: GangScheduling plugin. On by default in test clusters (``Cluster(gang=False)`` turns it off,
#: as on a cluster without the gate, so the operator's own all-or-nothing fallback is tested).
GANG_FEATURE_GATES = "GenericWorkload=true,GangScheduling=true"
#: Alpha API groups are not served unless asked for, gate or not.
GANG_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"


#: A cluster as before Kubernetes 1.34, where resource.k8s.io/v1 does not exist: the v1.36
#: components emulate 1.33 (``Cluster(emulate=...)``). Turning the group version off with
#: --runtime-config is not enough: 1.36's apiserver never becomes ready without it.
EMULATE_BEFORE_DRA = "1.33"


def emulation_flags(version: str | None) -> list[str]:
    """``--emulated-version`` when the cluster emulates an older Kubernetes."""
    return [f"--emulated-version={version}"] if version else []


def gang_flags(gang: bool) -> list[str]:
    """The feature-gate flag of the scheduler and controller manager when ``gang``."""
    return [f"--feature-gates={GANG_FEATURE_GATES}"] if gang else []


@dataclasses.dataclass(frozen=True)
class Ports:
    """The loopback ports one cluster listens on (picked free at ``up``)."""

    etcd: int
    apiserver: int
    controller_manager: int
    scheduler: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where one cluster keeps its files; everything lives under ``root``."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def nodes(self) -> Path:
        return self.root / "nodes"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def kubeconfig(self, component: str) -> Path:
        return self.root / f"{component}.kubeconfig"


def etcd(binary: Path, layout: Layout, ports: Ports) -> list[str]:
    url = f"http://127.0.0.1:{ports.etcd}"
    return [
        str(binary),
        "--name=default",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        # Port 0: the peer listener exists but binds nowhere predictable (single member).
        "--listen-peer-urls=http://127.0.0.1:0",
        "--log-level=warn",
        # Test data is disposable; skipping fsync makes every write much cheaper.
        "--unsafe-no-fsync=true",
    ]


def apiserver(binary: Path, layout: Layout, ports: Ports, gang: bool = True,
              emulate: str | None = None) -> list[str]:
    pki = layout.pki
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        "--advertise-address=127.0.0.1",
        # Endpoints reject loopback addresses, so the `kubernetes` Service gets none; pods reach
        # the apiserver through KUBERNETES_SERVICE_HOST=127.0.0.1 instead.
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--authorization-mode=Node,RBAC",
        # NodeRestriction is not on by default; the rest of the default admission set stays.
        "--enable-admission-plugins=NodeRestriction",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        "--profiling=false",
        *gang_flags(gang),
        *([f"--runtime-config={GANG_RUNTIME_CONFIG}"] if gang else []),
        *emulation_flags(emulate),
    ]


#: The node lifecycle controller's grace (--node-monitor-grace-period) in the test clusters.
NODE_MONITOR_GRACE_SECONDS = 25


def controller_manager(binary: Path, layout: Layout, ports: Ports, gang: bool = True,
                       emulate: str | None = None) -> list[str]:
    kubeconfig = layout.kubeconfig("controller-manager")
    pki = layout.pki
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        "--leader-elect=false",
        # Each controller acts as its own kube-system service account, bound by bootstrap RBAC.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--controllers=*",
        # A node whose agent stops is NotReady (Unknown) after this, not the default 50 s: the
        # node-loss tests wait for it. Two lease renewals (every 10 s) may be missed first.
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s",
        "--profiling=false",
        *gang_flags(gang),
        *emulation_flags(emulate),
    ]


def scheduler_config(layout: Layout) -> str:
    # With --config, deprecated flags such as --kubeconfig are silently ignored: everything the
    # scheduler needs goes in the file.
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "clientConnection:\n"
        f"  kubeconfig: {layout.kubeconfig('scheduler')}\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
    )


def scheduler(binary: Path, layout: Layout, ports: Ports, gang: bool = True,
              emulate: str | None = None) -> list[str]:
    kubeconfig = layout.kubeconfig("scheduler")
    return [
        str(binary),
        f"--config={layout.root / 'scheduler.yaml'}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--profiling=false",
        *gang_flags(gang),
        *emulation_flags(emulate),
    ]
