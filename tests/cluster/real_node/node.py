"""One real node's daemons: containerd, the kubelet and kube-proxy, started in the cluster's netns.

:meth:`RealNode.start` takes a machine-wide slot (:mod:`.slots`: containerd's root persists in it,
so images are imported only when they changed), writes credentials and configs (:mod:`.configs`),
makes the node's cgroup (:mod:`.cgroups`), starts containerd, clears the containers, sandboxes
and leases a previous run left in the slot, imports our images (:mod:`.images`) and drops the
images they replaced, then starts the kubelet and kube-proxy; :meth:`RealNode.stop` kills everything in the node's cgroup (daemons, shims,
containers), unmounts what they left (:mod:`.mounts`) and removes the cgroup. Driven by
:mod:`tests.cluster.real_node.cluster`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.cluster import binaries, kubeconfigs, pki, processes
from tests.cluster.real_node import cgroups, configs, images, mounts, netns, slots, tunables

START_TIMEOUT = 120.0
#: The images every real node gets (the e2e tests need all of them).
IMPORTED = ("pause", "operator", "proc-server", "examples")
#: Seconds one ``ctr`` command may take (an image import takes minutes, and has no bound here).
CTR_TIMEOUT = 120


class NodeError(RuntimeError):
    """A daemon of the real node failed to start; the message quotes its log."""


def stale_references(rows: list[list[str]], current: set[str]) -> list[str]:
    """The image references of ``ctr images ls`` rows (reference, type, digest, ...) that name
    no current image: neither one of the ``current`` references nor another name of the same
    manifest. The CRI plugin names every image it sees also by its ID (``sha256:<config>``);
    when an import moves a tag to a rebuilt image, that ID name still holds the replaced image,
    its layers and their unpacked snapshots (the slot grew by about 1 GB a run)."""
    kept = {row[2] for row in rows if len(row) > 2 and row[0] in current}
    return [row[0] for row in rows if len(row) > 2 and row[2] not in kept]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class RealNode:
    """The daemons of one node, in folder ``spec.folder``, joined to namespace ``netns_name``."""

    DAEMONS = ("containerd", "kubelet", "kube-proxy")

    def __init__(self, spec: configs.NodeSpec, netns_name: str) -> None:
        self.spec = spec
        self.netns = netns_name

    @property
    def logs(self) -> Path:
        return self.spec.folder / "logs"

    def _pidfile(self, daemon: str) -> Path:
        return self.spec.folder / f"{daemon}.pid"

    def _spawn(self, daemon: str, argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
        proc = processes.spawn([*netns.enter(self.netns), *argv], self._pidfile(daemon),
                               self.logs / f"{daemon}.log", pass_fds=pass_fds)
        # Into the node's cgroup before it can start anything: shims and pods follow it there.
        cgroups.join(f"{self.spec.cgroup}/daemons", proc.pid)

    def _wait(self, daemon: str, check: Callable[[], bool], timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if processes.read_pidfile(self._pidfile(daemon)) is None:
                raise NodeError(f"{daemon} exited while starting; the end of its log:\n"
                                f"{_tail(self.logs / f'{daemon}.log')}")
            if time.monotonic() > deadline:
                raise NodeError(f"{daemon} not ready after {timeout:.0f} s; the end of its log:\n"
                                f"{_tail(self.logs / f'{daemon}.log')}")
            time.sleep(0.2)

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(binaries.path("ctr")), "--address", str(self.spec.containerd_socket), "-n", "k8s.io", *args]
        try:  # bounded: a sandbox's stop against a dead shim must not hang `up`
            return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=CTR_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise NodeError(f"`{' '.join(cmd)}` did not finish within {CTR_TIMEOUT} s; containerd's log: "
                            f"{self.logs / 'containerd.log'}") from None

    def _ctr_ok(self) -> bool:
        return self._ctr("version").returncode == 0

    def _start_containerd(self, slot_lock: int) -> None:
        config = self.spec.folder / "containerd.toml"
        # containerd inherits the slot's lock and holds it until it exits.
        self._spawn("containerd", [str(binaries.path("containerd")), "--config", str(config)],
                    pass_fds=(slot_lock,))
        self._wait("containerd", self._ctr_ok)

    def _listed(self, *what: str) -> list[list[str]]:
        """The rows of a ``ctr ... ls`` table, split into columns, without its header."""
        return [line.split() for line in self._ctr(*what, "ls").stdout.splitlines()[1:] if line.strip()]

    def _clear_previous_run(self, slot_lock: int) -> None:
        """Delete what a previous run left in the slot's root: its containers (with their
        snapshots), the CRI's pod sandboxes and the leases each sandbox holds on its snapshots
        and content; then restart containerd so that its CRI plugin starts from that state."""
        containers = [row[0] for row in self._listed("containers")]
        sandboxes = [row[0] for row in self._listed("sandboxes")]
        leases = [row[0] for row in self._listed("leases")]
        if not (containers or sandboxes or leases):
            return
        for container in containers:
            self._ctr("containers", "rm", container)
        for sandbox in sandboxes:
            self._ctr("sandboxes", "rm", "--force", sandbox)
        for lease in leases:
            self._ctr("leases", "rm", lease)
        # `ctr sandboxes rm` says nothing of a sandbox it could not remove (and exits 0).
        left = [row[0] for what in ("containers", "sandboxes", "leases") for row in self._listed(what)]
        if left:
            raise NodeError(f"containerd of slot root {self.spec.containerd_root} kept {left} of a previous "
                            f"run (its log: {self.logs / 'containerd.log'}); delete that folder to start "
                            f"the slot afresh (its images are imported again)")
        processes.stop_pidfiles([self._pidfile("containerd")], grace=10)
        self._start_containerd(slot_lock)

    def _import(self, slot: int, records: dict[str, dict[str, str]]) -> None:
        """Import the images the slot's containerd does not hold in their current build, then
        drop every image reference to anything else (:func:`stale_references`)."""
        present = set(self._ctr("images", "ls", "-q").stdout.split())
        done = slots.imported(slot)
        stale = [n for n in IMPORTED
                 if n not in records or done.get(n) != records[n]["hash"] or records[n]["ref"] not in present]
        images.import_all(binaries.path("ctr"), self.spec.containerd_socket, records, stale)
        for name in stale:
            slots.record_import(slot, name, records[name]["hash"])
        old = stale_references(self._listed("images"), {records[n]["ref"] for n in IMPORTED})
        if old:  # --sync: garbage-collected (content and snapshots) before the kubelet starts
            removed = self._ctr("images", "rm", "--sync", *old)
            if removed.returncode != 0:
                raise NodeError(f"removing replaced images {old} from slot root {self.spec.containerd_root} "
                                f"failed: {removed.stderr.strip() or removed.stdout.strip()}; delete that "
                                f"folder to start the slot afresh (its images are imported again)")

    # Starting...

    def start(self, ca: pki.KeyPair, server: str, records: dict[str, dict[str, str]]) -> None:
        """Start containerd, import the images, start the kubelet and kube-proxy."""
        slot, slot_lock = slots.reserve()
        try:
            self._start(ca, server, records, slot, slot_lock)
        finally:
            os.close(slot_lock)  # containerd holds the slot from here on, until it exits

    def _start(self, ca: pki.KeyPair, server: str, records: dict[str, dict[str, str]],
               slot: int, slot_lock: int) -> None:
        self.spec = spec = dataclasses.replace(self.spec, containerd_root=slots.root(slot))
        for folder in (spec.folder, self.logs, spec.run_dir, spec.cni_conf_dir, spec.kubelet_root,
                       spec.folder / "pod-logs", spec.folder / "pki"):
            folder.mkdir(parents=True, exist_ok=True)
        certs = spec.folder / "pki"
        user = f"system:node:{spec.name}"
        node_pair = pki.make_cert(ca, certs, "node", user, organization="system:nodes")
        kubeconfigs.write(spec.folder / "kubelet.kubeconfig", server, ca.cert, node_pair, user)
        serving = pki.make_cert(ca, certs, "serving", user, organization="system:nodes",
                                sans=(f"IP:{spec.node_ip}", f"DNS:{spec.name}"), server=True)
        # Bound to the system:node-proxier ClusterRole by the API server's bootstrap RBAC.
        proxy_pair = pki.make_cert(ca, certs, "kube-proxy", "system:kube-proxy")
        kubeconfigs.write(spec.folder / "kube-proxy.kubeconfig", server, ca.cert, proxy_pair, "system:kube-proxy")
        (spec.folder / "containerd.toml").write_text(configs.containerd(spec))
        (spec.cni_conf_dir / "10-procmesh.conflist").write_text(configs.cni_network(spec))
        (spec.folder / "kubelet.yaml").write_text(configs.kubelet(spec, serving.cert, serving.key))
        (spec.folder / "kube-proxy.yaml").write_text(
            configs.kube_proxy(spec, spec.folder / "kube-proxy.kubeconfig"))
        (spec.folder / "resolv.conf").write_text("# no cluster DNS in the procmesh test cluster\n")
        cgroups.create(spec.cgroup, "daemons")

        (spec.folder / "slot").write_text(f"{slot}\n")
        self._start_containerd(slot_lock)
        self._clear_previous_run(slot_lock)
        self._import(slot, records)
        tunables.save()  # the kubelet sets host-wide kernel tunables: restored by the last `down`
        self._spawn("kubelet", [
            str(binaries.path("kubelet")),
            f"--config={spec.folder / 'kubelet.yaml'}",
            f"--kubeconfig={spec.folder / 'kubelet.kubeconfig'}",
            f"--root-dir={spec.kubelet_root}",
            f"--hostname-override={spec.name}",
            f"--node-ip={spec.node_ip}",
            "--v=2",
        ])
        self._spawn("kube-proxy", [str(binaries.path("kube-proxy")), f"--config={spec.folder / 'kube-proxy.yaml'}",
                                   "--v=2"])

    def alive(self, daemon: str) -> bool:
        return processes.read_pidfile(self._pidfile(daemon)) is not None

    def check_alive(self) -> None:
        """Raise :class:`NodeError` with the log of a daemon that has exited."""
        for daemon in self.DAEMONS:
            if self._pidfile(daemon).exists() and not self.alive(daemon):
                raise NodeError(f"{daemon} of node {self.spec.name} exited; the end of its log:\n"
                                f"{_tail(self.logs / f'{daemon}.log')}")

    # Stopping...

    def stop(self) -> None:
        """Kill every process of the node (daemons, shims, containers), unmount, remove cgroups."""
        # SIGTERM first, so the kubelet and containerd exit cleanly when they can.
        processes.stop_pidfiles([self._pidfile(d) for d in reversed(self.DAEMONS)], grace=5)
        cgroups.kill_all(self.spec.cgroup)
        held = self.spec.folder / "slot"
        roots = [self.spec.folder, self.spec.run_dir]
        if held.exists():
            roots.append(slots.root(int(held.read_text())))
        mounts.unmount_under(*roots)
        cgroups.remove(self.spec.cgroup)
        shutil.rmtree(self.spec.run_dir, ignore_errors=True)
        # Volumes go; containerd's root stays in its slot (images), the logs for a post-mortem.
        shutil.rmtree(self.spec.kubelet_root, ignore_errors=True)
