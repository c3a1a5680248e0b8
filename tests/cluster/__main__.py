"""``python -m tests.cluster up|down|status|add-node``: the test cluster from a shell.

``up`` returns once the control plane and one process node are healthy, leaves them running in
the background and prints the admin kubeconfig's path; ``down`` stops everything. The folder is
``$PROCMESH_CLUSTER_DIR`` (default ``/tmp/procmesh-cluster``). See :mod:`tests.cluster.controlplane`.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.cluster import binaries, controlplane, processes
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.real_node import cluster as real_cluster
from tests.cluster.real_node import images
from tests.cluster.real_node import node as real_node


def _node_args(parser: argparse.ArgumentParser, default_name: str) -> None:
    parser.add_argument("--node-name", default=default_name)
    parser.add_argument("--gpus", type=int, default=0, help="physical GPUs of the node")
    parser.add_argument("--gpu-replicas", type=int, default=1, help="time-slicing replicas per GPU")
    parser.add_argument("--gpu-resource", default="nvidia.com/gpu")
    parser.add_argument("--host-gpus", default=None,
                        help="comma-separated host CUDA indices backing the node's GPUs")
    parser.add_argument("--dra", action="store_true",
                        help="also act as the NVIDIA DRA GPU driver (publish a ResourceSlice)")


def _node(args: argparse.Namespace) -> NodeConfig:
    host = tuple(int(i) for i in args.host_gpus.split(",")) if args.host_gpus else None
    return NodeConfig(name=args.node_name, gpus=args.gpus, gpu_replicas=args.gpu_replicas,
                      gpu_resource=args.gpu_resource, host_gpus=host, dra=args.dra)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__)
    parser.add_argument("--dir", default=None, help="cluster folder (default: $PROCMESH_CLUSTER_DIR "
                        f"or {controlplane.DEFAULT_DIR})")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start the control plane and one process node")
    _node_args(up, "node-0")
    up.add_argument("--no-node", action="store_true", help="start no process node")
    up.add_argument("--no-gang", action="store_true",
                    help="without the Workload/PodGroup API and gang scheduling (on by default)")
    up.add_argument("--kueue", action="store_true",
                    help="also run Kueue's controller manager (tests/cluster/kueue; built on first use)")
    up.add_argument("--real-node", action="store_true",
                    help="a real node (kubelet, containerd, kube-proxy) instead of a process node; "
                    "the cluster runs in a network namespace of its own (needs `images` first)")
    commands.add_parser("down", help="stop everything")
    commands.add_parser("status", help="print which processes run")
    add = commands.add_parser("add-node", help="start one more process node")
    _node_args(add, "node-1")
    add.add_argument("--real-node", action="store_true", help="a real node (see `up --real-node`)")
    build = commands.add_parser("images", help="build (or reuse) our images for the real node")
    build.add_argument("names", nargs="*", help="images to build (default: all)")
    build.add_argument("--force", action="store_true", help="rebuild even when cached")
    build.add_argument("--archives", action="store_true",
                       help="print `archive NAME REF FILE` per importable image (for `kind load image-archive`)")
    args = parser.parse_args(argv)
    if args.command == "images":
        return images.main([*args.names, *(["--force"] if args.force else []),
                            *(["--archives"] if args.archives else [])])

    try:
        return _run(args)
    except (binaries.BinariesMissing, controlplane.ClusterError, real_node.NodeError, images.ImageError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    started_real = real_cluster.is_real(args.dir or controlplane.default_dir())
    if args.command == "add-node" and args.real_node and not started_real:
        raise controlplane.ClusterError("a real node joins a cluster started with `up --real-node` "
                                        "(whose control plane runs in the node's network namespace)")
    real = args.real_node if args.command == "up" else started_real
    gang = not getattr(args, "no_gang", False)
    cluster = real_cluster.RealNodeCluster(args.dir) if real else controlplane.Cluster(args.dir, gang=gang)
    if args.command == "up" and isinstance(cluster, real_cluster.RealNodeCluster):
        started = time.monotonic()
        cluster.up(real_nodes=() if args.no_node else (args.node_name,))
        print(f"cluster up in {time.monotonic() - started:.1f} s", file=sys.stderr)
        print(cluster.kubeconfig)
    elif args.command == "add-node" and isinstance(cluster, real_cluster.RealNodeCluster):
        cluster.add_real_node(args.node_name)
    elif args.command == "up":
        started = time.monotonic()
        cluster.up([] if args.no_node else [_node(args)])
        if args.kueue:
            from tests.cluster.kueue import manager as kueue_manager

            kueue_manager.start(cluster)
        print(f"cluster up in {time.monotonic() - started:.1f} s", file=sys.stderr)
        print(cluster.kubeconfig)
    elif args.command == "add-node":
        cluster.add_node(_node(args))
    elif args.command == "down":
        processes.stop_pidfiles([cluster.root / "kueue" / "kueue.pid"])  # `up --kueue`
        cluster.down()
    elif args.command == "status":
        run = cluster.layout.run
        for name in controlplane.COMPONENTS:
            pid = processes.read_pidfile(run / f"{name}.pid")
            print(f"{name}: {'running, pid ' + str(pid) if pid else 'stopped'}")
        if isinstance(cluster, real_cluster.RealNodeCluster):
            for real in cluster.real_nodes() if cluster.real_nodes_dir.exists() else []:
                for daemon in real.DAEMONS:
                    print(f"real node {real.spec.name} {daemon}: {'running' if real.alive(daemon) else 'stopped'}")
        for node in cluster.nodes() if cluster.layout.nodes.exists() else []:
            pid = processes.read_pidfile(cluster.layout.nodes / node.name / "agent.pid")
            print(f"process node {node.name}: {'running, pid ' + str(pid) if pid else 'stopped'}")
        print(f"kubeconfig: {cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
