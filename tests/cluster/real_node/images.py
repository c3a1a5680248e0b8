"""Our images, built without a Docker daemon, cached by a hash of their inputs, imported per node.

``python -m tests.cluster images`` builds, in order (each FROM the one it names):

- ``base``: a Debian bookworm rootfs from ``debootstrap`` (python3, venv, pip), as an image
  ``FROM scratch``: base images cannot be pulled on the test machines;
- ``torch-base``: ``base`` plus PyPI's torch wheel (the CUDA build; it runs on CPU too), installed
  from a wheel folder filled once by ``pip download`` (``~/.cache/procmesh/wheels``);
- ``operator``: ``operator/Dockerfile`` with ``BASE=base``;
- ``proc-server``: ``images/proc-server/Dockerfile`` with ``BASE=base``: CPU meshes need no torch
  (the Dockerfile's own note), and a torch image is 5.8 GB;
- ``examples``: what a user builds for their actors' dependencies: torch (``torch-base``),
  procmesh with the ``kubernetes`` extra, and ``examples/`` at :data:`EXAMPLES_DIR`; it runs the
  proc server as the proc-server image does, and controller Jobs (the examples pass ``--image``);
- ``pause``: the sandbox image of the real node (our ``pause`` binary, ``FROM scratch``).

buildah runs with ``--isolation chroot`` and the ``overlay`` storage driver (:data:`STORAGE_DRIVER`)
in a store of our own.
Each image is pushed to a ``docker-archive`` in the cache with a JSON record (reference, image
ID, input hash); :func:`import_all` loads them into a node's containerd with ``ctr``. Used by
:mod:`tests.cluster.real_node.node` and the e2e tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.cluster import binaries

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
#: The torch of the images: the version scripts/setup installs into the environment.
TORCH = "torch==2.15.0"
#: Where the examples image keeps ``examples/`` (procs and controller Jobs see the same path).
EXAMPLES_DIR = "/opt/procmesh/examples"
#: Bump when the way an image is built changes without its inputs changing.
RECIPE = "v1"


class ImageError(RuntimeError):
    """An image could not be built or imported; the message says which step and what to do."""


def _version() -> str:
    for line in (REPO / "charts" / "procmesh-operator" / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise ImageError("charts/procmesh-operator/Chart.yaml has no appVersion")


def cache() -> Path:
    """``~/.cache/procmesh/images`` (``$XDG_CACHE_HOME`` honoured): archives, records, store."""
    return binaries.cache_root().parent / "images"


def wheels() -> Path:
    return binaries.cache_root().parent / "wheels"


# Inputs and hashes...


def _tree_files(*roots: str) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        path = REPO / root
        if path.is_file():
            files.append(path)
            continue
        files += [p for p in sorted(path.rglob("*"))
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")]
    return files


#: What ``pip install .`` in our Dockerfiles reads (the .dockerignore allow-list).
PACKAGE_FILES = ("pyproject.toml", "README.md", "mesh_client", "operator/procmesh_operator")


@dataclasses.dataclass(frozen=True)
class Image:
    """One image: its name here, the reference it is tagged with, and how to build it."""

    name: str
    ref: str
    #: The image this one is built FROM (one of ours), or None.
    base: str | None
    #: Strings and files whose content decides the image (with the base's hash).
    recipe: tuple[str, ...]
    files: Callable[[], list[Path]]

    def digest(self, hashes: dict[str, str]) -> str:
        h = hashlib.sha256(f"{RECIPE} {self.name} {self.ref}".encode())
        for part in self.recipe:
            h.update(part.encode())
        if self.base:
            h.update(hashes[self.base].encode())
        for path in self.files():
            h.update(path.name.encode() if not path.is_relative_to(REPO) else str(path.relative_to(REPO)).encode())
            h.update(path.read_bytes())
        return h.hexdigest()[:16]


def images() -> list[Image]:
    """Every image, bases first."""
    version = _version()
    return [
        Image("base", "localhost/procmesh/debian-python:bookworm", None,
              (DEBIAN_SUITE, DEBIAN_MIRROR, *DEBIAN_PACKAGES), list),
        Image("torch-base", "localhost/procmesh/debian-python-torch:bookworm", "base", (TORCH,), list),
        Image("operator", f"docker.io/procmesh/operator:{version}", "base", (),
              lambda: _tree_files("operator/Dockerfile", *PACKAGE_FILES)),
        Image("proc-server", f"docker.io/procmesh/proc-server:{version}", "base", (),
              lambda: _tree_files("images/proc-server/Dockerfile", *PACKAGE_FILES)),
        Image("examples", f"docker.io/procmesh/examples:{version}", "torch-base", (EXAMPLES_DIR,),
              lambda: _tree_files("tests/cluster/real_node/examples.Dockerfile", "examples", *PACKAGE_FILES)),
        Image("pause", "localhost/procmesh/pause:latest", None, (),
              lambda: [binaries.bin_dir() / "pause"] if (binaries.bin_dir() / "pause").exists() else []),
    ]


def _hashes() -> dict[str, str]:
    hashes: dict[str, str] = {}
    for image in images():
        hashes[image.name] = image.digest(hashes)
    return hashes


def record_path(name: str, digest: str) -> Path:
    return cache() / "archives" / f"{name}-{digest}.json"


def built() -> dict[str, dict[str, str]]:
    """The records of the images built for the current inputs, by name (missing ones absent)."""
    found = {}
    for name, digest in _hashes().items():
        path = record_path(name, digest)
        if path.exists():
            found[name] = json.loads(path.read_text())
    return found


# Building...


#: Images that only serve as the base of others: kept in buildah's store, never archived.
BASES = ("base", "torch-base")


#: buildah's storage driver. ``overlay`` (the kernel's overlayfs, as root) gives a build container
#: its base's files without copying them; ``vfs`` copied the 5.8 GB torch base for every image
#: built on it, which made the examples image the slowest step.
STORAGE_DRIVER = "overlay"


def _store_args() -> list[str]:
    return ["--storage-driver", STORAGE_DRIVER, "--root", str(cache() / f"storage-{STORAGE_DRIVER}"),
            "--runroot", str(cache() / f"runroot-{STORAGE_DRIVER}")]


def _present(ref: str) -> bool:
    done = subprocess.run(["buildah", *_store_args(), "inspect", "--type", "image", ref],
                          capture_output=True, check=False)
    return done.returncode == 0


def _buildah(*args: str) -> str:
    argv = ["buildah", *_store_args(), *args]
    print("+ " + " ".join(argv), flush=True)
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise ImageError(f"`{' '.join(argv)}` failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return done.stdout


def _bud(context: Path, dockerfile: Path, ref: str, build_args: dict[str, str],
         volumes: Iterable[str] = ()) -> None:
    args = ["bud", "--isolation", "chroot", "--network", "host", "-f", str(dockerfile), "-t", ref]
    for key, value in build_args.items():
        args += ["--build-arg", f"{key}={value}"]
    for volume in (*_trust_volumes(), *volumes):
        args += ["-v", volume]
    _buildah(*args, str(context))


def _trust_volumes() -> list[str]:
    """The host's CA bundle and a pip.conf naming it, mounted into RUN steps only (never in an
    image): the test machines reach PyPI through a proxy whose CA only the host trusts."""
    bundle = Path(os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt")
    if not bundle.exists():
        return []
    conf = cache() / "pip.conf"
    conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    return [f"{bundle}:/etc/ssl/certs/ca-certificates.crt:ro", f"{conf}:/etc/pip.conf:ro"]


def _debootstrap_context(context: Path) -> None:
    rootfs = context / "rootfs"
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
           DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR]
    print("+ " + " ".join(cmd), flush=True)
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed: run scripts/setup (apt-get install debootstrap)")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    # As python:slim: `pip install` into the image's Python is what the Dockerfiles do.
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for folder in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / folder).glob("*"):
            if entry.is_file():
                entry.unlink()
    subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*",
                    "--exclude=./sys/*", "-cf", str(context / "rootfs.tar"), "."], check=True)
    shutil.rmtree(rootfs)
    (context / "Dockerfile").write_text(
        "FROM scratch\nADD rootfs.tar /\nENV LANG=C.UTF-8\nCMD [\"python3\"]\n")


def _ensure_wheels() -> Path:
    folder = wheels()
    if not list(folder.glob("torch-*.whl")):
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(folder), TORCH]
        print("+ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return folder


def _build_one(image: Image, refs: dict[str, str], scratch: Path) -> None:
    base = {"BASE": refs[image.base]} if image.base else {}
    if image.name == "base":
        _debootstrap_context(scratch)
        _bud(scratch, scratch / "Dockerfile", image.ref, {})
    elif image.name == "torch-base":
        (scratch / "Dockerfile").write_text(
            "ARG BASE\nFROM ${BASE}\n"
            f"RUN python -m pip install --no-cache-dir --no-index --find-links /wheels '{TORCH}' \\\n"
            " && python -c 'import torch; print(torch.__version__)'\n")
        _bud(scratch, scratch / "Dockerfile", image.ref, base, volumes=[f"{_ensure_wheels()}:/wheels:ro"])
    elif image.name == "operator":
        _bud(REPO, REPO / "operator" / "Dockerfile", image.ref, base)
    elif image.name == "proc-server":
        _bud(REPO, REPO / "images" / "proc-server" / "Dockerfile", image.ref, base)
    elif image.name == "examples":
        for part in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / part, scratch / part)
        shutil.copytree(REPO / "mesh_client", scratch / "mesh_client", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copytree(REPO / "operator" / "procmesh_operator", scratch / "operator" / "procmesh_operator",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(REPO / "examples", scratch / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        _bud(scratch, HERE / "examples.Dockerfile", image.ref, {**base, "EXAMPLES_DIR": EXAMPLES_DIR})
    elif image.name == "pause":
        shutil.copy(binaries.path("pause"), scratch / "pause")
        (scratch / "Dockerfile").write_text('FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n')
        _bud(scratch, scratch / "Dockerfile", image.ref, {})
    else:
        raise ImageError(f"no recipe for image {image.name!r}")


def build(names: Iterable[str] | None = None, force: bool = False) -> dict[str, dict[str, str]]:
    """Build (or reuse) the images and their archives; return the records by name."""
    wanted = set(names) if names else {i.name for i in images()}
    hashes = _hashes()
    refs = {i.name: i.ref for i in images()}
    archives = cache() / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict[str, str]] = {}
    rebuilt = False
    for image in images():
        needed = image.name in wanted or any(
            i.base == image.name and i.name in wanted for i in images())
        path = record_path(image.name, hashes[image.name])
        # A base lives only in buildah's store: rebuilt if the store lost it.
        if path.exists() and not force and (image.name not in BASES or _present(image.ref)):
            records[image.name] = json.loads(path.read_text())
            print(f"image {image.name}: up to date ({image.ref}, {hashes[image.name]})", flush=True)
            continue
        if not needed:
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"image-{image.name}-", dir=cache()) as scratch:
            _build_one(image, refs, Path(scratch))
        image_id = _buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", image.ref).strip()
        archive = archives / f"{image.name}-{hashes[image.name]}.tar"
        for old in archives.glob(f"{image.name}-*"):
            old.unlink()
        if image.name not in BASES:  # only what nodes import needs an archive
            _buildah("push", image.ref, f"docker-archive:{archive}:{image.ref}")
        record = {"name": image.name, "ref": image.ref, "id": f"sha256:{image_id}",
                  "hash": hashes[image.name], "archive": str(archive) if archive.exists() else "",
                  "seconds": f"{time.monotonic() - started:.0f}",
                  "bytes": str(archive.stat().st_size) if archive.exists() else "0"}
        path.write_text(json.dumps(record, indent=2))
        records[image.name] = record
        print(f"image {image.name}: built {image.ref} in {record['seconds']} s, "
              f"archive {int(record['bytes']) / 2**20:.0f} MiB", flush=True)
        rebuilt = True
    if rebuilt:  # the previous builds of what changed (untagged now): gigabytes of layers
        _buildah("rmi", "--prune")
    return records


# Importing...


def import_all(ctr: Path, socket: Path, records: dict[str, dict[str, str]],
               names: Iterable[str] = ("pause", "operator", "proc-server", "examples")) -> None:
    """Load the named images' archives into a node's containerd (namespace ``k8s.io``, for CRI)."""
    for name in names:
        if name not in records:
            raise ImageError(f"image {name} is not built for the current sources: run "
                             "`python -m tests.cluster images`")
        cmd = [str(ctr), "--address", str(socket), "-n", "k8s.io", "images", "import",
               "--snapshotter", "overlayfs", records[name]["archive"]]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ImageError(f"`{' '.join(cmd)}` failed: {done.stderr.strip() or done.stdout.strip()}")


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.cluster images [NAME ...] [--force]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.cluster images", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="images to build (default: all)")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    parser.add_argument("--archives", action="store_true",
                        help="after building, print one line per importable image: archive NAME REF FILE "
                        "(docker-archive files, e.g. for `kind load image-archive`)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("images: buildah (overlay storage, chroot isolation) needs root here", file=sys.stderr)
        return 1
    try:
        records = build(args.names or None, args.force)
    except (ImageError, subprocess.CalledProcessError, binaries.BinariesMissing) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.archives:
        for name, record in sorted(records.items()):
            if record.get("archive") and name not in BASES:
                print("archive", name, record["ref"], record["archive"])
    return 0
