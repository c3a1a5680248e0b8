"""Build-or-reuse the ``kwok`` controller: ``python -m tests.cluster.kwok.build``
(or ``bash tests/cluster/build.sh --kwok``).

Only the scale tests and benchmarks need KWOK; ``scripts/setup`` builds it beside the image
builds, and the first test that needs it builds it where setup did not run, into
``~/.cache/procmesh/bin/kwok-<hash>/``: the hash covers ``gomod/go.mod``, ``go.sum`` and
:data:`RECIPE`, and is apart from :func:`tests.cluster.binaries.pin_hash`, so the control-plane
binaries are not rebuilt when KWOK's pin moves (nor KWOK when theirs does). Beside the binary it
writes ``stages.yaml``: the default Stages of the pinned KWOK, read from the module's own
``kustomize/stage/fast`` (what ``kwokctl`` gives a cluster), which :mod:`.simulator` passes to the
controller with ``--config``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.cluster import binaries

GOMOD = Path(__file__).resolve().parent / "gomod"
MODULE = "sigs.k8s.io/kwok"
#: Bump when the flags or the stage selection change, so the cache is rebuilt.
RECIPE = "v1: CGO_ENABLED=0 -trimpath -ldflags=-s -w (KWOK keeps its version in a constant); stages kustomize/stage/fast"
#: The stage folders of ``kustomize/stage/fast/kustomization.yaml`` in KWOK v0.8.0: node
#: initialisation (Ready, addresses, capacity), node heartbeats with a Lease, and the pod
#: lifecycle (Running and Ready, completion, deletion).
STAGE_DIRS = ("kustomize/stage/node/fast", "kustomize/stage/node/heartbeat-with-lease",
              "kustomize/stage/pod/fast")
BINARY = "kwok"
STAGES = "stages.yaml"


def pinned_version() -> str:
    """The version ``gomod/go.mod`` requires of KWOK."""
    for line in (GOMOD / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in (MODULE, "require") and MODULE in words:
            return words[words.index(MODULE) + 1]
    raise RuntimeError(f"{GOMOD / 'go.mod'} does not pin {MODULE}")


def pin_hash() -> str:
    """The cache key: the pinned module files and :data:`RECIPE`."""
    digest = hashlib.sha256(RECIPE.encode())
    for name in ("go.mod", "go.sum"):
        digest.update(name.encode())
        digest.update((GOMOD / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """``$PROCMESH_KWOK_DIR`` when set (a folder with ``kwok`` and ``stages.yaml`` built
    elsewhere), else the cache folder for the current pin (it may not exist yet)."""
    given = os.environ.get("PROCMESH_KWOK_DIR")
    return Path(given) if given else binaries.cache_root() / f"kwok-{pin_hash()}"


def missing() -> list[str]:
    """What of the binary and the stages file :func:`cache_dir` lacks."""
    folder = cache_dir()
    absent = [] if os.access(folder / BINARY, os.X_OK) else [BINARY]
    return absent + ([] if (folder / STAGES).is_file() else [STAGES])


def _env() -> dict[str, str]:
    return dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local",
                GOFLAGS="-buildvcs=false -mod=readonly")


def build(target: Path, jobs: int) -> None:
    """Build the controller into ``target`` and gather the default stages beside it."""
    version = pinned_version()
    cmd = ["go", "build", f"-p={jobs}", "-trimpath", "-ldflags", "-s -w",
           "-o", str(target / BINARY), f"{MODULE}/cmd/kwok"]
    print(f"+ (cd {GOMOD}) {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=GOMOD, env=_env(), check=True)
    source = Path(subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", MODULE], cwd=GOMOD,
                                 env=_env(), check=True, capture_output=True,
                                 text=True).stdout.strip())
    documents = []
    for folder in STAGE_DIRS:
        for path in sorted((source / folder).glob("*.yaml")):
            if path.name != "kustomization.yaml":
                documents.append(f"# {MODULE}@{version}/{folder}/{path.name}\n"
                                 + path.read_text().strip() + "\n")
    if not documents:
        raise RuntimeError(f"no Stage files under {source}: is {MODULE}@{version} complete?")
    (target / STAGES).write_text("---\n".join(documents))


def ensure(jobs: int = 2, force: bool = False) -> Path:
    """The KWOK folder for the current pin, built first when incomplete."""
    final = cache_dir()
    if not force and not missing():
        print(f"kwok up to date in {final}", file=sys.stderr, flush=True)
        return final
    if os.environ.get("PROCMESH_KWOK_DIR"):
        raise RuntimeError(f"$PROCMESH_KWOK_DIR={final} lacks {', '.join(missing())}")
    took = binaries.build_into(final, ".build-kwok-", lambda scratch: build(scratch, jobs))
    print(f"built kwok {pinned_version()} into {final} in {took:.0f} s",
          flush=True)
    return final


def main(argv: list[str] | None = None) -> int:
    """Command line: build-or-reuse, then print the folder."""
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.kwok.build", description=__doc__)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2,
                        help="parallel compile jobs (go build -p)")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    ensure(args.jobs, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
