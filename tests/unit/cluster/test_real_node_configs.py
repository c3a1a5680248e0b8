"""The real node's rendered configuration: what keeps it inside its namespace and its folders,
and the cgroup v1 settings this machine needs (pure functions, no daemons)."""

from __future__ import annotations

import json
from pathlib import Path

import tomllib
import yaml

from tests.cluster.real_node import cluster, configs, netns

SPEC = configs.NodeSpec(
    name="node-0", folder=Path("/c/real-nodes/node-0"), run_dir=Path("/run/procmesh/x/node-0"),
    bin_dir=Path("/bin-cache"), ca_cert=Path("/c/pki/ca.crt"), cgroup="procmesh-x-node-0",
    sandbox_image="localhost/procmesh/pause:latest", service_cidr="10.96.0.0/16",
)


def test_kubelet_runs_on_cgroup_v1_with_cgroupfs_under_its_own_cgroup():
    config = yaml.safe_load(configs.kubelet(SPEC, Path("/s.crt"), Path("/s.key")))
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "procmesh-x-node-0"
    assert config["containerRuntimeEndpoint"] == "unix:///run/procmesh/x/node-0/containerd.sock"
    assert config["address"] == configs.NODE_IP and config["readOnlyPort"] == 0
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    # Nothing of the host's: logs, resolv.conf under the node's folder.
    assert config["podLogsDir"].startswith(str(SPEC.folder))
    assert config["resolvConf"].startswith(str(SPEC.folder))


def test_containerd_keeps_its_state_runc_and_pod_netns_off_host_wide_paths():
    config = tomllib.loads(configs.containerd(SPEC))
    assert config["version"] == 3
    assert config["root"].startswith(str(SPEC.folder)) and config["state"].startswith(str(SPEC.run_dir))
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["netns_mounts_under_state_dir"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["Root"].startswith(str(SPEC.run_dir))
    assert runtime["cni"]["bin_dirs"] == ["/bin-cache/cni"]
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == SPEC.sandbox_image
    assert config["plugins"]["io.containerd.grpc.v1.cri"]["stream_server_address"] == "127.0.0.1"


def test_the_pod_network_masquerades_nothing_and_keeps_leases_in_the_node_folder():
    network = json.loads(configs.cni_network(SPEC))
    bridge, portmap = network["plugins"]
    assert bridge["type"] == "bridge" and bridge["ipMasq"] is False and bridge["isGateway"] is True
    assert bridge["ipam"]["dataDir"].startswith(str(SPEC.folder))
    assert bridge["ipam"]["ranges"] == [[{"subnet": configs.POD_SUBNET, "gateway": configs.POD_GATEWAY}]]
    assert portmap["type"] == "portmap"


def test_kube_proxy_leaves_conntrack_sizes_alone():
    config = yaml.safe_load(configs.kube_proxy(SPEC, Path("/k.kubeconfig")))
    assert config["mode"] == "iptables" and config["hostnameOverride"] == "node-0"
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["min"] == 0


def test_apiserver_flags_are_replaced_by_name_and_the_rest_kept():
    argv = ["/bin/kube-apiserver", "--bind-address=127.0.0.1", "--secure-port=6443",
            "--endpoint-reconciler-type=none"]
    out = cluster._flag_overrides(argv, cluster.APISERVER_FLAGS)
    assert out[:4] == ["/bin/kube-apiserver", "--bind-address=0.0.0.0", "--secure-port=6443",
                       "--endpoint-reconciler-type=lease"]
    assert out[4:] == [f"--advertise-address={configs.NODE_IP}"]


def test_each_cluster_folder_gets_its_own_short_namespace_name():
    a, b = netns.name_for(Path("/tmp/a")), netns.name_for(Path("/tmp/b"))
    assert a != b and a == netns.name_for(Path("/tmp/a")) and len(a) <= 20
