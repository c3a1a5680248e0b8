"""Build-or-reuse the control-plane binaries: ``python -m tests.cluster.build``.

Builds stripped, static binaries from the Go modules under ``gomod/`` into
:func:`tests.cluster.binaries.cache_dir`, skipping the work when that folder is complete.
``tests/cluster/build.sh`` (what CI calls) runs this module. Each component has its own Go module
so that minimum version selection never mixes etcd's or helm's dependencies with Kubernetes ones.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.cluster import binaries

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: Built in the same invocation as the control plane, from the same pinned module.
KUBE_NODE_COMMANDS = ("kubelet", "kube-proxy")
#: Static containerd has no btrfs snapshotter (cgo); devmapper and zfs are not used either.
CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs"


def _pinned(module: str, path: str) -> str:
    """The version ``gomod/<module>/go.mod`` requires of ``path``."""
    text = (binaries.GOMOD_DIR / module / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(path)} (v\S+)", text, re.M)
    if not match:
        raise RuntimeError(f"gomod/{module}/go.mod does not pin {path}")
    return match.group(1)


def _kube_ldflags(version: str) -> str:
    # Stamp the version: unstamped builds report v0.0.0-master, which breaks helm kubeVersion
    # checks and kubectl's skew logic. buildDate is fixed so rebuilds are reproducible.
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def _go(args: list[str], module: str, jobs: int) -> None:
    env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS="-buildvcs=false -mod=readonly")
    cmd = ["go", "build", f"-p={jobs}", "-trimpath", *args]
    print(f"+ (cd gomod/{module}) {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=binaries.GOMOD_DIR / module, env=env, check=True)


def build(target: Path, jobs: int) -> None:
    """Build every binary of :data:`tests.cluster.binaries.ALL` into ``target``."""
    version = _pinned("kubernetes", "k8s.io/kubernetes")
    helm_version = _pinned("helm", "helm.sh/helm/v3")
    # The three Kubernetes commands in one invocation, so they share compiled packages.
    _go(
        ["-ldflags", _kube_ldflags(version), "-o", f"{target}/",
         *(f"k8s.io/kubernetes/cmd/{c}" for c in (*KUBE_COMMANDS, *KUBE_NODE_COMMANDS))],
        "kubernetes", jobs,
    )
    _go(["-ldflags", "-s -w", "-o", str(target / "etcd"), "go.etcd.io/etcd/server/v3"], "etcd", jobs)
    helm_flags = f"-s -w -X helm.sh/helm/v3/internal/version.version={helm_version}"
    _go(["-ldflags", helm_flags, "-o", str(target / "helm"), "helm.sh/helm/v3/cmd/helm"], "helm", jobs)
    build_node(target, jobs)


def build_node(target: Path, jobs: int) -> None:
    """Build containerd, its runc shim, ctr and the CNI plugins of the real node into ``target``."""
    containerd = _pinned("containerd", "github.com/containerd/containerd/v2")
    # The CRI plugin reports this version, so `kubectl get node -o wide` shows containerd://<it>.
    stamp = f"-s -w -X github.com/containerd/containerd/v2/version.Version={containerd.lstrip('v')}"
    _go(["-tags", CONTAINERD_TAGS, "-ldflags", stamp, "-o", f"{target}/",
         *(f"github.com/containerd/containerd/v2/cmd/{c}"
           for c in ("containerd", "containerd-shim-runc-v2", "ctr"))],
        "containerd", jobs)
    plugins = _pinned("cni", "github.com/containernetworking/plugins")
    stamp = f"-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion={plugins}"
    kinds = {"bridge": "main", "loopback": "main", "host-local": "ipam", "portmap": "meta"}
    (target / "cni").mkdir(exist_ok=True)
    _go(["-ldflags", stamp, "-o", f"{target}/cni/",
         *(f"github.com/containernetworking/plugins/plugins/{kinds[p]}/{p}" for p in binaries.CNI_PLUGINS)],
        "cni", jobs)
    _go(["-ldflags", "-s -w", "-o", str(target / "pause"), "."], "pause", jobs)


def ensure(jobs: int = 2, force: bool = False) -> Path:
    """Return the cache folder for the current pins, building into it first if it is incomplete."""
    final = binaries.cache_dir()
    if not force and all(os.access(final / n, os.X_OK) for n in (*binaries.ALL, *binaries.NODE)):
        print(f"binaries up to date in {final}", flush=True)
        return final
    took = binaries.build_into(final, ".build-", lambda scratch: build(scratch, jobs))
    print(f"built {', '.join((*binaries.ALL, *binaries.NODE))} into {final} in {took:.0f} s", flush=True)
    return final


def main(argv: list[str] | None = None) -> int:
    """Command line: build-or-reuse, then print the binaries folder."""
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.build", description=__doc__)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2,
                        help="parallel compile jobs (go build -p)")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    if os.environ.get(binaries.BIN_DIR_ENV):
        absent = binaries.missing()
        if absent:
            print(f"${binaries.BIN_DIR_ENV} lacks {', '.join(absent)}", file=sys.stderr)
            return 1
        print(f"using prebuilt binaries from ${binaries.BIN_DIR_ENV}={binaries.bin_dir()}")
        return 0
    ensure(args.jobs, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
