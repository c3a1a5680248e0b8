"""The network namespace a real-node cluster lives in, made and removed by the harness.

It holds loopback (with the node's address), a blackhole default route, the Service range
routed to loopback, and later the pods' bridge that the CNI plugin creates: no interface leads to the host's namespace or beyond, so no
packet sent inside can leave it. Processes join it with ``nsenter --net`` (not ``ip netns exec``,
which would also give each process a mount namespace of its own, and the kubelet and containerd
must see each other's mounts). Used by :mod:`tests.cluster.real_node.cluster`.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

NETNS_DIR = Path("/run/netns")
#: Every real-node cluster's namespace starts so (tests.cluster.real_node.tunables counts them).
PREFIX = "procmesh-"


def name_for(root: Path) -> str:
    """The namespace's name for a cluster folder: short, and unique per folder on the machine."""
    return PREFIX + hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:10]


def path(name: str) -> Path:
    return NETNS_DIR / name


def exists(name: str) -> bool:
    return path(name).exists()


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


def create(name: str, node_ip: str, service_cidr: str) -> None:
    """Make the namespace: loopback up with ``node_ip``, a blackhole default route, and the
    Service range routed to loopback.

    The default route exists because some components look for one; a blackhole route discards
    what is sent to it, so even a packet for an outside address goes nowhere. A process of the
    namespace itself needs a route to a ClusterIP before kube-proxy's OUTPUT rules rewrite it to a
    pod (connect() on a blackhole route fails with EINVAL): loopback is that route, and a packet
    no rule rewrote comes back in on loopback and is dropped as a martian.
    """
    if exists(name):
        delete(name)
    _ip("netns", "add", name)
    _ip("-n", name, "link", "set", "lo", "up")
    _ip("-n", name, "addr", "add", f"{node_ip}/32", "dev", "lo")
    _ip("-n", name, "route", "add", "blackhole", "default")
    _ip("-n", name, "route", "add", service_cidr, "dev", "lo")


def delete(name: str) -> None:
    """Remove the namespace (its interfaces, addresses and iptables rules go with it)."""
    if exists(name):
        _ip("netns", "delete", name)


def enter(name: str) -> list[str]:
    """The command prefix that runs a program in the namespace (and nothing else changed)."""
    return ["nsenter", f"--net={path(name)}", "--"]
