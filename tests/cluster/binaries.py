"""Where the control-plane binaries live: a cache keyed by the pinned Go modules, or a given folder.

The key is a hash of every ``gomod/*/go.mod``, ``go.sum`` and ``*.go`` plus :data:`RECIPE` (the build
flags), so binaries are reused while the pins are unchanged and rebuilt when they change.
:mod:`tests.cluster.build` fills the cache; :mod:`tests.cluster.controlplane` reads it.
``PROCMESH_CLUSTER_BIN_DIR`` names a folder of prebuilt binaries instead (for a machine where
nothing can be built, such as a GPU box).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: The folder holding the Go modules that pin each component.
GOMOD_DIR = Path(__file__).resolve().parent / "gomod"

#: Environment variable naming a folder of prebuilt binaries; it wins over the cache.
BIN_DIR_ENV = "PROCMESH_CLUSTER_BIN_DIR"

#: Bump when the build flags change, so cached binaries are rebuilt.
RECIPE = ("v3: CGO_ENABLED=0 -trimpath -ldflags=-s -w, k8s, helm, containerd and CNI versions stamped;"
          " containerd tags no_btrfs no_devmapper no_zfs")

#: The binaries the control plane needs, and helm (used by the chart tests).
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ALL = (*CONTROL_PLANE, "helm")

#: The CNI plugins the real node's containerd calls, kept in the ``cni/`` subfolder.
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")

#: The binaries of the real node (tests/cluster/real_node); runc comes from Debian's package.
NODE = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "pause",
        *(f"cni/{plugin}" for plugin in CNI_PLUGINS))


class BinariesMissing(RuntimeError):
    """Raised when a needed binary is neither in the cache nor in ``$PROCMESH_CLUSTER_BIN_DIR``."""


def pin_hash() -> str:
    """Hash of the pinned Go modules and the build recipe: the cache key."""
    digest = hashlib.sha256(RECIPE.encode())
    for path in sorted(GOMOD_DIR.glob("*/*")):
        if path.name in ("go.mod", "go.sum") or path.suffix == ".go":  # .go: the pause program
            digest.update(str(path.relative_to(GOMOD_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/procmesh/bin`` (``~/.cache/procmesh/bin`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "procmesh" / "bin"


def cache_dir() -> Path:
    """The cache folder for the current pins (it may not exist yet)."""
    return cache_root() / pin_hash()


def bin_dir() -> Path:
    """The folder binaries are taken from: ``$PROCMESH_CLUSTER_BIN_DIR`` if set, else the cache."""
    given = os.environ.get(BIN_DIR_ENV)
    return Path(given) if given else cache_dir()


def missing(names: tuple[str, ...] = ALL) -> list[str]:
    """The binaries among ``names`` that :func:`bin_dir` lacks."""
    folder = bin_dir()
    return [n for n in names if not os.access(folder / n, os.X_OK)]


def path(name: str) -> Path:
    """The path of one binary; raises :class:`BinariesMissing` naming the fix when it is absent."""
    found = bin_dir() / name
    if not os.access(found, os.X_OK):
        if os.environ.get(BIN_DIR_ENV):
            hint = f"${BIN_DIR_ENV}={os.environ[BIN_DIR_ENV]} has no executable {name!r}"
        else:
            hint = f"{found} is missing: run `bash tests/cluster/build.sh` to build the binaries"
        raise BinariesMissing(hint)
    return found


def build_into(final: Path, prefix: str, build: Callable[[Path], None]) -> float:
    """Run ``build(scratch)`` in a scratch folder beside ``final`` and then put it in ``final``'s
    place, so a cache folder is either complete or absent; the seconds it took."""
    final.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=prefix, dir=final.parent) as scratch:
        build(Path(scratch))
        if final.exists():
            shutil.rmtree(final)
        os.rename(scratch, final)
        final.chmod(0o755)
        os.mkdir(scratch)  # so TemporaryDirectory's cleanup finds something to remove
    return time.monotonic() - started
