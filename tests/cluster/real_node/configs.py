"""Configuration files of one real node: pure functions of a :class:`NodeSpec`.

The kubelet's and kube-proxy's YAML, containerd's TOML and the CNI network list, rendered as text
so that unit tests can read them; :mod:`tests.cluster.real_node.node` writes them and starts the
daemons. Every setting that differs from a default is commented with why (the README repeats
them for users of the harness).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

#: Where the node sits in its network namespace: the API server advertises NODE_IP too, so that
#: the ``kubernetes`` Service (through kube-proxy) reaches it from pods.
NODE_IP = "10.200.0.1"
#: The pods' range on the node's bridge; the bridge holds the gateway (.1).
POD_SUBNET = "10.201.0.0/24"
POD_GATEWAY = "10.201.0.1"
#: Ports inside the namespace (nothing else listens there, so fixed ports are safe).
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
PROXY_HEALTHZ_PORT = 10256
PROXY_METRICS_PORT = 10249


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One real node: its name, folders and the images its runtime pins."""

    name: str
    #: Persistent folder (configs, logs, kubelet root, containerd root, CNI state).
    folder: Path
    #: Short folder on /run for containerd's state and sockets (unix socket paths are short).
    run_dir: Path
    bin_dir: Path
    ca_cert: Path
    #: The cgroup (in every v1 hierarchy) that holds the node's daemons and its pods.
    cgroup: str
    sandbox_image: str
    service_cidr: str
    #: containerd's root (content, snapshots, metadata): a slot's (tests.cluster.real_node.slots).
    containerd_root: Path | None = None
    cluster_cidr: str = POD_SUBNET
    node_ip: str = NODE_IP

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.folder / "kubelet"

    @property
    def cni_conf_dir(self) -> Path:
        return self.folder / "cni" / "net.d"

    @property
    def network_name(self) -> str:
        return f"procmesh-{self.name}"


def containerd(spec: NodeSpec) -> str:
    """containerd's config (version 3, containerd 2.x): CRI with runc and our CNI folders."""
    cri_runtime = '[plugins."io.containerd.cri.v1.runtime"'
    return "\n".join([
        "version = 3",
        f'root = "{spec.containerd_root or spec.folder / "containerd" / "root"}"',
        f'state = "{spec.run_dir / "state"}"',
        "[grpc]",
        f'  address = "{spec.containerd_socket}"',
        "[ttrpc]",
        f'  address = "{spec.run_dir / "containerd.sock.ttrpc"}"',
        "[debug]",
        '  level = "info"',
        '[plugins."io.containerd.cri.v1.images"]',
        # overlayfs works on the ext4 root of the test machines; the default, stated for clarity.
        '  snapshotter = "overlayfs"',
        '[plugins."io.containerd.cri.v1.images".pinned_images]',
        # Our own pause image: registry.k8s.io cannot be pulled here. Pinned, so image GC keeps it.
        f'  sandbox = "{spec.sandbox_image}"',
        f"{cri_runtime}]",
        # Pod network namespaces under our state folder, not the host-wide /var/run/netns.
        "  netns_mounts_under_state_dir = true",
        # Root here lacks CAP_SYS_RESOURCE (the test VM drops it), so no process may lower its
        # oom_score_adj: keep every container's at or above containerd's (the pause container's
        # -998 and Guaranteed pods' -997 would fail `runc create`).
        "  restrict_oom_score_adj = true",
        f'{cri_runtime}.containerd]',
        '  default_runtime_name = "runc"',
        f'{cri_runtime}.containerd.runtimes.runc]',
        '  runtime_type = "io.containerd.runc.v2"',
        f'{cri_runtime}.containerd.runtimes.runc.options]',
        '  BinaryName = "/usr/sbin/runc"',
        # cgroupfs, as the kubelet: this machine mounts cgroup v1 hierarchies and runs no systemd.
        "  SystemdCgroup = false",
        # runc's state of this node only, not the host-wide /run/containerd/runc.
        f'  Root = "{spec.run_dir / "runc"}"',
        f"{cri_runtime}.cni]",
        f'  bin_dirs = ["{spec.bin_dir / "cni"}"]',
        f'  conf_dir = "{spec.cni_conf_dir}"',
        "  max_conf_num = 1",
        '[plugins."io.containerd.grpc.v1.cri"]',
        # Exec/attach/port-forward streams: loopback of the node's namespace, a free port.
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "",
    ])


def cni_network(spec: NodeSpec) -> str:
    """The pod network: a bridge with the gateway, host-local addresses, port mappings."""
    network = {
        "cniVersion": "1.0.0",
        "name": spec.network_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                # No masquerade: nothing is routed out of the node's namespace anyway.
                "ipMasq": False,
                # A pod reaching itself through its Service IP.
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": spec.cluster_cidr, "gateway": POD_GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    # Address leases in the node's folder, not the host-wide /var/lib/cni.
                    "dataDir": str(spec.folder / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(network, indent=2) + "\n"


def kubelet(spec: NodeSpec, serving_cert: Path, serving_key: Path) -> str:
    """The KubeletConfiguration: cgroup v1 with cgroupfs, x509 + webhook auth, our folders."""
    lines = [
        "apiVersion: kubelet.config.k8s.io/v1beta1",
        "kind: KubeletConfiguration",
        # This machine (a Firecracker VM) mounts cgroup v1 hierarchies; kubelet 1.35+ refuses v1
        # unless told otherwise.
        "failCgroupV1: false",
        # No systemd here: the kubelet writes cgroups itself, as runc does (SystemdCgroup=false).
        "cgroupDriver: cgroupfs",
        # Every pod under this node's own cgroup, so nodes of several clusters never share one
        # and `down` can kill and remove all of it.
        f"cgroupRoot: {spec.cgroup}",
        f"containerRuntimeEndpoint: unix://{spec.containerd_socket}",
        f"address: {spec.node_ip}",
        f"port: {KUBELET_PORT}",
        "readOnlyPort: 0",
        "healthzBindAddress: 127.0.0.1",
        f"healthzPort: {KUBELET_HEALTHZ_PORT}",
        f"tlsCertFile: {serving_cert}",
        f"tlsPrivateKeyFile: {serving_key}",
        "authentication:",
        "  anonymous: {enabled: false}",
        "  webhook: {enabled: true}",
        f"  x509: {{clientCAFile: {spec.ca_cert}}}",
        "authorization: {mode: Webhook}",
        f"podLogsDir: {spec.folder / 'pod-logs'}",
        # No cluster DNS in the test cluster; pods get an empty resolv.conf of ours, not the host's.
        f"resolvConf: {spec.folder / 'resolv.conf'}",
        # The machines have no swap, but do not fail if one has.
        "failSwapOn: false",
        # Images are imported, never pulled: never garbage-collect them, and evict nothing
        # because a shared test disk is fuller than a node's would be.
        "imageGCHighThresholdPercent: 100",
        "imageGCLowThresholdPercent: 99",
        "evictionHard: {memory.available: '1Mi', nodefs.available: '0%', imagefs.available: '0%',"
        " nodefs.inodesFree: '0%'}",
        "serializeImagePulls: false",
        "registerNode: true",
        "rotateCertificates: false",
        "serverTLSBootstrap: false",
        # The kubelet would otherwise check (and on failure, refuse) host-wide kernel tunables.
        "protectKernelDefaults: false",
        "nodeStatusUpdateFrequency: 4s",
        # Not -999: without CAP_SYS_RESOURCE nothing can lower its oom_score_adj here.
        "oomScoreAdj: 0",
        "syncFrequency: 10s",
        "",
    ]
    return "\n".join(lines)


def kube_proxy(spec: NodeSpec, kubeconfig: Path) -> str:
    """The KubeProxyConfiguration: iptables mode inside the node's namespace."""
    return "\n".join([
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
        "kind: KubeProxyConfiguration",
        "mode: iptables",
        f"hostnameOverride: {spec.name}",
        f"clusterCIDR: {spec.cluster_cidr}",
        "clientConnection:",
        f"  kubeconfig: {kubeconfig}",
        f"healthzBindAddress: 127.0.0.1:{PROXY_HEALTHZ_PORT}",
        f"metricsBindAddress: 127.0.0.1:{PROXY_METRICS_PORT}",
        # Service traffic is masqueraded to the node's bridge address, so that a pod reaching
        # another pod of the same bridge through a ClusterIP gets the reply back through the
        # node (without it, replies bypass conntrack unless br_netfilter is set host-wide).
        "iptables: {masqueradeAll: true}",
        # Not -999: without CAP_SYS_RESOURCE nothing can lower its oom_score_adj here.
        "oomScoreAdj: 0",
        # 0: leave the conntrack table's size and timeouts as they are (host-wide in part).
        "conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}",
        "",
    ])
