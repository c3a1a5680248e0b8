"""Machine-wide slots of real nodes: each holds a containerd root that outlives the cluster.

Importing our images into a fresh containerd takes minutes (the examples image is 5.8 GB), so a
real node's containerd keeps its content and snapshots in ``~/.cache/procmesh/real-node/slot-<i>``
and imports only what changed since that slot's last run. A slot is held by an ``flock`` on
``/tmp/procmesh-real-node-slots/<i>.lock`` (or under ``$PROCMESH_REAL_NODE_SLOTS``) that the
node's containerd inherits and keeps until it exits, so two running nodes never share a root.
Used by :mod:`tests.cluster.real_node.node`.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from tests.cluster import binaries

SLOTS_ENV = "PROCMESH_REAL_NODE_SLOTS"
#: More real nodes than this at once on one machine are refused.
MAX_SLOTS = 8


def _locks() -> Path:
    return Path(os.environ.get(SLOTS_ENV) or "/tmp/procmesh-real-node-slots")


def reserve() -> tuple[int, int]:
    """The lowest free slot and its open, locked file descriptor (inheritable)."""
    folder = _locks()
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(MAX_SLOTS):
        fd = os.open(folder / f"{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.set_inheritable(fd, True)
        return index, fd
    raise RuntimeError(f"all {MAX_SLOTS} real-node slots of this machine are in use "
                       f"(locks in {folder}): stop a real-node cluster first")


def root(index: int) -> Path:
    """The persistent containerd root of slot ``index``."""
    return binaries.cache_root().parent / "real-node" / f"slot-{index}"


def imported(index: int) -> dict[str, str]:
    """What the slot's containerd holds: image name -> input hash of the imported archive."""
    path = root(index) / "imported.json"
    found: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    return found


def record_import(index: int, name: str, digest: str) -> None:
    done = imported(index)
    done[name] = digest
    (root(index) / "imported.json").write_text(json.dumps(done, indent=2))
