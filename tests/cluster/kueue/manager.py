"""Kueue's controller manager as a process of a test cluster: CRDs, certificates, start, stop.

:func:`start` installs the CRDs of the pinned module (server-side apply: the Workload CRD is too
large for kubectl's last-applied annotation), creates the ``kueue-system`` namespace, signs a
webhook serving certificate for 127.0.0.1 with the cluster CA (:mod:`tests.cluster.pki`),
writes the Configuration (:mod:`.configs`) and starts ``kueue`` with the admin kubeconfig, in
its own session and log like the control plane's components (:mod:`tests.cluster.processes`).
It returns once ``/readyz`` answers. Everything lives under ``<cluster>/kueue/``.

One thing Kueue reads from a fixed path: with internal cert management off, its metrics server
wants ``/etc/kueue/metrics/certs/tls.{crt,key}`` (hard-coded in cmd/kueue/main.go, even with
metrics off). So the process runs in a private mount namespace (``unshare --mount``, as the
process node runs containers) where this cluster's own folder is bind-mounted there; the host
only gets the empty mount point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.cluster import controlplane, pki, processes
from tests.cluster.kueue import builds, configs

START_TIMEOUT = 120.0
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Kueue:
    """A running Kueue of one cluster."""

    folder: Path
    health_port: int

    @property
    def pidfile(self) -> Path:
        return self.folder / "kueue.pid"

    @property
    def log(self) -> Path:
        return self.folder / "kueue.log"

    def running(self) -> bool:
        return processes.read_pidfile(self.pidfile) is not None

    def stop(self) -> None:
        processes.stop_pidfiles([self.pidfile], grace=10)

    def ready(self) -> bool:
        """Ready, and this very Kueue answers: the health port was picked free a moment before
        it started, so a Kueue of another worker's cluster could hold it (as the control plane's
        components are checked, :func:`processes.listens_on`)."""
        pid = processes.read_pidfile(self.pidfile)
        if pid is None or not processes.listens_on(pid, self.health_port):
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False


def _kubectl(cluster: controlplane.Cluster, *args: str, input: str | None = None) -> str:
    result = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args],
                            input=input, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


#: How long Kueue's CRDs may take to be Established.
ESTABLISHED_TIMEOUT = 60.0


def install_crds(cluster: controlplane.Cluster, crds: Path) -> None:
    """Kueue's CRDs, applied server-side and waited on until Established. A CRD read before the
    API server first writes its status has no conditions at all, and ``kubectl wait`` then fails
    at once ('.status.conditions accessor error: <nil> is of the type <nil>') instead of waiting:
    asked again until the timeout."""
    _kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(crds))
    deadline = time.monotonic() + ESTABLISHED_TIMEOUT
    while True:
        try:
            _kubectl(cluster, "wait", "--for=condition=Established", f"--timeout={ESTABLISHED_TIMEOUT:.0f}s",
                     "-f", str(crds))
            return
        except RuntimeError as error:
            if "accessor error" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def start(cluster: controlplane.Cluster, *, wait_for_pods_ready: dict[str, Any] | None = None) -> Kueue:
    """Build (if needed), install and start Kueue against ``cluster``; return once it is ready.
    ``wait_for_pods_ready``: the Configuration's ``waitForPodsReady`` (:func:`configs.configuration`)."""
    built = builds.ensure()
    folder = cluster.root / "kueue"
    if folder.exists():
        shutil.rmtree(folder)
    certs = folder / "certs"
    certs.mkdir(parents=True)
    install_crds(cluster, built / builds.CRDS)
    _kubectl(cluster, "apply", "-f", "-", input=_kubectl(
        cluster, "create", "namespace", configs.NAMESPACE, "--dry-run=client", "-o", "yaml"))
    ca = pki.KeyPair(cluster.layout.pki / "ca.crt", cluster.layout.pki / "ca.key")
    pair = pki.make_cert(ca, certs, "tls", "kueue-webhook", sans=("IP:127.0.0.1",), server=True)
    assert pair.cert.name == "tls.crt" and pair.key.name == "tls.key"  # what Kueue looks for
    kueue = Kueue(folder, _free_port())
    config = folder / "config.yaml"
    config.write_text(configs.configuration(webhook_port=_free_port(), health_port=kueue.health_port,
                                            cert_dir=certs, wait_for_pods_ready=wait_for_pods_ready))
    METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)  # the mount point (empty on the host)
    argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", str(certs), str(METRICS_CERT_DIR),
            str(built / builds.BINARY), f"--config={config}", f"--kubeconfig={cluster.kubeconfig}",
            "--zap-log-level=info"]
    processes.spawn(argv, kueue.pidfile, kueue.log)
    deadline = time.monotonic() + START_TIMEOUT
    while not kueue.ready():
        if not kueue.running():
            raise RuntimeError(f"kueue exited while starting; the end of {kueue.log}:\n"
                               f"{_tail(kueue.log)}")
        if time.monotonic() > deadline:
            kueue.stop()
            raise RuntimeError(f"kueue not ready after {START_TIMEOUT:.0f} s; the end of "
                               f"{kueue.log}:\n{_tail(kueue.log)}")
        time.sleep(0.2)
    return kueue


@contextlib.contextmanager
def restarted(cluster: controlplane.Cluster, session: Kueue, *,
              wait_for_pods_ready: dict[str, Any] | None = None) -> Iterator[Kueue]:
    """``session`` (the cluster's running Kueue) replaced by one started with another
    Configuration for the ``with`` block, and a Kueue of the default Configuration started in
    its folder afterwards (``session``'s pidfile names it, so the session's fixture stops it).
    The default comes back also when the other one fails to start: the session's Kueue was
    stopped already, and every later Kueue test of the process would meet none."""
    session.stop()
    other: Kueue | None = None
    try:
        other = start(cluster, wait_for_pods_ready=wait_for_pods_ready)
        yield other
    finally:
        if other is not None:
            other.stop()
        start(cluster)


@contextlib.contextmanager
def stopped(cluster: controlplane.Cluster, session: Kueue) -> Iterator[None]:
    """``session`` (the cluster's running Kueue) stopped for the ``with`` block, as a Kueue
    down or restarting is, then a Kueue of the default Configuration started in its folder
    (``session``'s pidfile names it, so the session's fixture stops it)."""
    session.stop()
    try:
        yield
    finally:
        start(cluster)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
