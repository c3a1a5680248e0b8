"""Build-or-reuse Kueue's controller manager: ``python -m tests.cluster.kueue.builds``.

Kueue is pinned in its own Go module (``tests/cluster/kueue/gomod/``), kept out of
``tests/cluster/gomod/`` on purpose: the control plane's cache key
(:func:`tests.cluster.binaries.pin_hash`) does not move when Kueue's pin does, and Kueue (a
6-minute cold build on two cores) is built by ``scripts/setup`` beside the image builds, or else
when a test first needs it (:func:`ensure`, called by the ``kueue`` fixture). The binary and the CRDs of the pinned module (``config/components/crd/
bases``) land in ``$XDG_CACHE_HOME/procmesh/bin/kueue-<hash>/``. v0.17.0's go.mod has no
``replace`` directive, so building it as a dependency of our module gives Kueue's own versions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cluster import binaries

GOMOD = Path(__file__).resolve().parent / "gomod"
MODULE = "sigs.k8s.io/kueue"
#: Bump when the build flags change.
RECIPE = "v1: CGO_ENABLED=0 -trimpath -ldflags=-s -w, version stamped; CRDs of config/components/crd/bases"
BINARY = "kueue"
CRDS = "crds"


def pinned_version() -> str:
    """The version of ``sigs.k8s.io/kueue`` that ``gomod/go.mod`` requires."""
    for line in (GOMOD / "go.mod").read_text().splitlines():
        words = line.split()
        if MODULE in words:
            return words[words.index(MODULE) + 1]
    raise RuntimeError(f"{GOMOD / 'go.mod'} does not pin {MODULE}")


def pin_hash() -> str:
    digest = hashlib.sha256(RECIPE.encode())
    for name in ("go.mod", "go.sum"):
        digest.update((GOMOD / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """Where the current pin's binary and CRDs live (it may not exist yet); a prebuilt folder
    named by ``$PROCMESH_CLUSTER_BIN_DIR`` wins when it has ``kueue`` and ``crds/`` in it."""
    given = os.environ.get(binaries.BIN_DIR_ENV)
    if given and (Path(given) / BINARY).exists():
        return Path(given)
    return binaries.cache_root() / f"kueue-{pin_hash()}"


def ready(folder: Path) -> bool:
    return os.access(folder / BINARY, os.X_OK) and any((folder / CRDS).glob("*.yaml"))


def _go(*args: str, env: dict[str, str]) -> str:
    return subprocess.run(["go", *args], cwd=GOMOD, env=env, check=True,
                          capture_output=True, text=True).stdout


def build(target: Path, jobs: int) -> None:
    """Build ``kueue`` into ``target`` and copy the pinned module's CRDs to ``target/crds``."""
    env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local",
               GOFLAGS="-buildvcs=false -mod=readonly")
    version = pinned_version()
    ldflags = f"-s -w -X {MODULE}/pkg/version.GitVersion={version}"
    print(f"+ (cd {GOMOD}) go build -p={jobs} -trimpath -ldflags '{ldflags}' {MODULE}/cmd/kueue",
          flush=True)
    subprocess.run(["go", "build", f"-p={jobs}", "-trimpath", "-ldflags", ldflags,
                    "-o", str(target / BINARY), f"{MODULE}/cmd/kueue"],
                   cwd=GOMOD, env=env, check=True)
    source = Path(json.loads(_go("list", "-m", "-json", MODULE, env=env))["Dir"])
    (target / CRDS).mkdir()
    for crd in sorted((source / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        shutil.copyfile(crd, target / CRDS / crd.name)


def ensure(jobs: int = os.cpu_count() or 2) -> Path:
    """The folder with ``kueue`` and ``crds/`` for the current pin, built first if absent."""
    final = cache_dir()
    if ready(final):
        return final
    took = binaries.build_into(final, ".build-kueue-", lambda scratch: build(scratch, jobs))
    print(f"built kueue {pinned_version()} into {final} in {took:.0f} s",
          flush=True)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.kueue.builds", description=__doc__)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2,
                        help="parallel compile jobs (go build -p)")
    args = parser.parse_args(argv)
    print(ensure(args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
