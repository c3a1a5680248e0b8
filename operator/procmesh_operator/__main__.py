"""Entry point: ``procmesh-operator`` / ``python -m procmesh_operator``.

Loads credentials (in-cluster service account, else the current kubeconfig context), starts the
Prometheus metrics server, registers :mod:`.handlers` in a fresh kopf registry and runs kopf:
watching one or more namespaces or all of them, with a leader election (:mod:`.leading`) or kopf's
peering so that only one replica is active, a liveness endpoint, and structured (JSON) logs.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import pathlib
import random
import re
import resource
import sys
from collections.abc import Sequence
from typing import Any

import kopf
import kubernetes
import prometheus_client

from procmesh_operator import (
    __version__,
    exit_points,
    handlers,
    kubeclient,
    leading,
    memtrace,
    metrics,
    names,
    podwatch,
    quieting,
    reconciling,
)
from procmesh_operator import settings as settings_

LOG_FORMATS = {"json": kopf.LogFormat.JSON, "full": kopf.LogFormat.FULL,
               "plain": kopf.LogFormat.PLAIN}


def bind_host(address: str) -> str:
    """A listen address as a socket takes it: an IPv6 one written for URLs, ``[fd00::1]`` (the
    chart's ``operator.listenAddress`` on IPv6 clusters), loses its brackets (getaddrinfo
    refused it, and the operator exited at start)."""
    return address[1:-1] if address.startswith("[") and address.endswith("]") else address


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="procmesh-operator", description=(
        "Reconcile ProcMesh resources (procmesh.io/v1alpha1) into proc server pods."))
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("-n", "--namespace", action="append", metavar="NS",
                       help="watch this namespace (repeatable; globs as in kopf)")
    scope.add_argument("-A", "--all-namespaces", action="store_true",
                       help="watch every namespace")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG "
                                        "or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("--liveness", default="http://127.0.0.1:8080/healthz", metavar="URL",
                   help="liveness endpoint ('' to disable); in a pod use http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-address", default="127.0.0.1", help="Prometheus metrics bind address")
    p.add_argument("--metrics-port", type=int, default=9090, help="metrics port (0 disables)")
    p.add_argument("--peering", metavar="NAME",
                   help="kopf peering object that must exist (crds/kopf-peering.yaml), so that "
                        "only one replica acts; without it, peering 'procmesh' is used if the "
                        "peering CRDs are installed, else the operator runs standalone")
    p.add_argument("--standalone", action="store_true", help="no peering")
    p.add_argument("--leader-election", metavar="LEASE",
                   help="only the holder of this coordination.k8s.io Lease reconciles (every "
                        "replica watches); implies --standalone, not with --peering")
    p.add_argument("--leader-election-namespace", metavar="NS",
                   help="the Lease's namespace (default: the pod's own, in a cluster)")
    p.add_argument("--leader-election-lease-seconds", type=float, default=15.0, metavar="S",
                   help="how long a Lease not renewed stays its holder's (the holder stops "
                        "acting after 2/3 of it, and renews every S/7.5 s)")
    p.add_argument("--priority", type=parse_priority, default=0, metavar="INT|random",
                   help="peering priority of this replica; 'random' gives replicas of one "
                        "Deployment distinct priorities (equal priorities pause them all)")
    p.add_argument("--log-format", choices=sorted(LOG_FORMATS), default="json")
    p.add_argument("--access-logs", action="store_true",
                   help="log every request to the liveness endpoint (off by default: the probes "
                        "would be most of the log)")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--debug", action="store_true")
    defaults = settings_.Settings()
    p.add_argument("--default-image", default=defaults.default_image)
    p.add_argument("--default-image-runs-as-root", action="store_true",
                   help="the default image runs as root: pods using it do not say runAsNonRoot "
                        "(which would make the kubelet refuse them)")
    p.add_argument("--cuda-context-mib", type=int, default=defaults.cuda_context_mib)
    p.add_argument("--default-gpu-memory-mib", type=int, default=defaults.default_gpu_memory_mib)
    p.add_argument("--resync-seconds", type=float, default=defaults.resync_seconds)
    p.add_argument("--unseen-pod-seconds", type=float, default=defaults.unseen_pod_seconds,
                   help="report (in Ready) a proc pod that no scheduler has looked at this long: "
                        "a schedulerName no scheduler serves, or the kube-scheduler down")
    p.add_argument("--node-loss-toleration-seconds", type=int,
                   default=defaults.node_loss_toleration_seconds,
                   help="how long procs stay on a NotReady/unreachable node before they are "
                        "force-deleted and restarted elsewhere (a template's own tolerations "
                        "for those taints win)")
    p.add_argument("--restart-backoff-seconds", type=float,
                   default=defaults.restart_backoff_seconds,
                   help="a proc that fails again soon after its restart waits this long before "
                        "the next restart, doubling with each failure in a row (the first of a "
                        "row is restarted at once; 0: no back-off)")
    p.add_argument("--restart-backoff-max-seconds", type=float,
                   default=defaults.restart_backoff_max_seconds,
                   help="the longest restart back-off")
    p.add_argument("--restart-backoff-reset-seconds", type=float,
                   default=defaults.restart_backoff_reset_seconds,
                   help="a proc that ran this long before it failed starts a new row: restarted "
                        "at once")
    p.add_argument("--gang", choices=("auto", "podgroup", "gate", "off"), default=defaults.gang,
                   help="all-or-nothing placement of a mesh: the PodGroup API (Kubernetes 1.36, "
                        "gate GenericWorkload), the operator's scheduling gate, or off; auto "
                        "picks podgroup where the API is served, else gate")
    p.add_argument("--gang-stall-seconds", type=float, default=defaults.gang_stall_seconds,
                   help="gate mode: how long a released mesh may stay partly placed before all "
                        "its pods are recreated behind the gate")
    p.add_argument("--status-progress-seconds", type=float,
                   default=defaults.status_progress_seconds,
                   help="the shortest time between two status writes of a mesh that only move "
                        "its progress (ready counts, proc entries); phase and condition changes "
                        "are written at once; 0 writes every change")
    p.add_argument("--create-concurrency", type=int, default=defaults.create_concurrency,
                   help="pod creates in flight at once across all meshes (earlier meshes first)")
    p.add_argument("--memory-trace", type=pathlib.Path, metavar="DIR",
                   help="diagnostic, slow: trace allocations and write DIR/peak.txt at each new "
                        "peak of the RSS (what holds the memory); never in production")
    # Tests only: exit at once after a step (exit_points.ALL), as a SIGKILL would.
    p.add_argument("--test-exit-after", choices=exit_points.ALL, help=argparse.SUPPRESS)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = p.parse_args(argv)
    if args.leader_election is not None and not LEASE_NAME.fullmatch(args.leader_election):
        # An empty name read as "no leader election": every replica would act (or kopf's
        # peering would be used), silently.
        p.error(f"--leader-election needs the name of a Lease (lowercase letters, digits, '-' "
                f"and '.', starting and ending with a letter or digit), not "
                f"{args.leader_election!r}")
    for flag in ("restart_backoff_seconds", "restart_backoff_max_seconds",
                 "restart_backoff_reset_seconds"):
        if not 0 <= getattr(args, flag) < math.inf:
            p.error(f"--{flag.replace('_', '-')} must be a number of seconds, 0 or more, not "
                    f"{getattr(args, flag)}")
    if args.leader_election:
        if args.peering:
            p.error("--leader-election and --peering are two ways to one active replica: "
                    "give one of them")
        if args.leader_election_lease_seconds < 3:
            p.error("--leader-election-lease-seconds must be at least 3")
        args.standalone = True
        if not args.leader_election_namespace:
            args.leader_election_namespace = own_namespace()
            if not args.leader_election_namespace:
                p.error("--leader-election needs --leader-election-namespace outside a pod")
    return args


#: A Lease's name: a DNS subdomain (RFC 1123), at most 253 characters.
LEASE_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

#: Where a pod's service account token names its namespace.
SERVICE_ACCOUNT_NAMESPACE = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace() -> str | None:
    """The namespace of the pod this runs in (None outside a pod)."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


#: The exit status after losing the Lease.
LOST_LEASE_EXIT = 3


def lost_lease() -> None:
    """The Lease is gone to another replica, or could not be renewed: stop acting at once,
    as client-go's elected components do; the kubelet starts the container again, a follower."""
    logging.getLogger("procmesh_operator").error("exiting: no longer the leader")
    logging.shutdown()
    os._exit(LOST_LEASE_EXIT)



def parse_priority(value: str) -> int:
    """An integer, or ``random``: a random positive one (kopf pauses peers of equal priority,
    and the replicas of a Deployment share their arguments)."""
    if value == "random":
        return random.SystemRandom().randint(1, 2**31 - 1)
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is neither an integer nor 'random'") from None


def pod_watch_paths(all_namespaces: bool, namespaces: Sequence[str],
                    standalone: bool) -> list[str] | None:
    """Where the operator's own pod watch (:mod:`.podwatch`) lists and watches: every
    namespace, or each named one. None (kopf watches pods) when a name is a glob, which only
    kopf's namespace observation resolves, and with peering: kopf pauses its own watches
    while another replica is active, and nothing tells ours to pause too."""
    if not standalone:
        return None
    if all_namespaces:
        return [podwatch.all_namespaces_path()]
    if any(c in name for name in namespaces for c in "*?[]!,"):
        return None
    return [kubeclient.pods_path(name) for name in namespaces]


def load_configuration(kubeconfig: str | None, context: str | None) -> Any:
    """A kubernetes client Configuration: in-cluster if possible (and no kubeconfig was named),
    else the kubeconfig."""
    config = kubernetes.client.Configuration()
    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
    else:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=config)
    return config


def connection_info(config: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the same Configuration our own client uses."""
    header = (config.get_api_key_with_prefix("BearerToken")
              or config.get_api_key_with_prefix("authorization") or "")
    parts = header.split(" ", 1)
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0] or None)
    return kopf.ConnectionInfo(
        server=config.host, ca_path=config.ssl_ca_cert, insecure=not config.verify_ssl,
        scheme=scheme, token=token, certificate_path=config.cert_file,
        private_key_path=config.key_file)


def raise_open_files_limit() -> None:
    """Raise the soft limit of open descriptors to the hard one. Each watch holds a connection
    (three per watched namespace: pods, Services, Roles) beside up to 64 for requests and
    kopf's own: a container's usual soft limit, 1024, would run out near 300 namespaces."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:  # the kernel's nr_open may be lower: keep going
            logging.getLogger("procmesh_operator").warning(
                "could not raise the open files limit from %d to %d: %s", soft, target, e)


def main(argv: list[str] | None = None) -> int:
    """Run the operator until SIGINT/SIGTERM."""
    args = parse_args(argv)
    raise_open_files_limit()
    if args.memory_trace is not None:
        memtrace.start(args.memory_trace)
    kopf.configure(debug=args.debug, verbose=args.verbose, log_format=LOG_FORMATS[args.log_format])
    logging.getLogger("procmesh_operator").setLevel(logging.DEBUG if args.debug else logging.INFO)
    if not args.verbose and not args.debug:  # kopf's line per handler run, one per pod event
        quieting.install()
    if not args.access_logs:  # aiohttp's access log of kopf's liveness endpoint
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    config = load_configuration(args.kubeconfig, args.context)
    settings = settings_.Settings(
        default_image=args.default_image, default_image_non_root=not args.default_image_runs_as_root,
        cuda_context_mib=args.cuda_context_mib,
        default_gpu_memory_mib=args.default_gpu_memory_mib, resync_seconds=args.resync_seconds,
        node_loss_toleration_seconds=args.node_loss_toleration_seconds, gang=args.gang,
        gang_stall_seconds=args.gang_stall_seconds,
        restart_backoff_seconds=args.restart_backoff_seconds,
        restart_backoff_max_seconds=args.restart_backoff_max_seconds,
        restart_backoff_reset_seconds=args.restart_backoff_reset_seconds,
        status_progress_seconds=args.status_progress_seconds,
        create_concurrency=args.create_concurrency, test_exit_after=args.test_exit_after,
        unseen_pod_seconds=args.unseen_pod_seconds)
    if args.metrics_port:
        prometheus_client.start_http_server(args.metrics_port, addr=bind_host(args.metrics_address))

    def make_controller() -> reconciling.Controller:
        client = kubeclient.KubeClient(config, on_request=metrics.count_request)
        elector = None
        if args.leader_election:
            # A client of its own: renewals never wait behind a wave of reconciles for one of
            # the controller client's connections (kubeclient.CONNECTIONS).
            elector = leading.Elector(kubeclient.KubeClient(
                config, on_request=metrics.count_request), leading.Election(
                args.leader_election_namespace, args.leader_election, names.instance(),
                args.leader_election_lease_seconds), lost_lease)
        return reconciling.Controller(client, settings, elector)

    registry = kopf.OperatorRegistry()
    handlers.register(registry, make_controller, lambda **_: connection_info(config),
                      peering_name=handlers.DEFAULT_PEERING if args.peering is None else None,
                      pod_watch_paths=pod_watch_paths(args.all_namespaces, args.namespace or (),
                                                      args.standalone))
    kopf.run(
        registry=registry,
        clusterwide=args.all_namespaces,
        namespaces=args.namespace or (),
        standalone=True if args.standalone else None,
        priority=args.priority,
        peering_name=args.peering,
        liveness_endpoint=args.liveness or None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
