"""Machine-wide node slots: each running process node holds one, so no two clusters share addresses.

A node's slot picks its loopback address and its pod range (:class:`.config.NodeConfig`). Those are
machine-wide resources: two test clusters started side by side (two pytest sessions, a benchmark
beside a test run) must never hand out the same pod IP, or one cluster's proc server would answer
the other's port 26600. A slot is an ``flock`` on ``<slot dir>/<index>.lock``; the launcher takes it
and passes the locked descriptor to the node's agent, which holds it until it exits (the kernel
drops the lock then, whatever killed the agent). Used by :mod:`tests.cluster.controlplane`.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

SLOTS = 240  # 127.<10..249>.0.0/16 pod ranges


def slot_dir() -> Path:
    """Where the lock files live: ``$PROCMESH_NODE_SLOTS`` or ``<tmp>/procmesh-node-slots``."""
    folder = Path(os.environ.get("PROCMESH_NODE_SLOTS") or Path(tempfile.gettempdir()) / "procmesh-node-slots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def try_reserve(index: int) -> int | None:
    """Lock slot ``index``; the locked descriptor (inheritable), or None if another node holds it."""
    fd = os.open(slot_dir() / f"{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.set_inheritable(fd, True)
    return fd


def reserve(skip: Iterable[int] = ()) -> tuple[int, int]:
    """The lowest free slot not in ``skip``, locked: ``(index, descriptor)``."""
    skipped = set(skip)
    for index in range(SLOTS):
        if index in skipped:
            continue
        fd = try_reserve(index)
        if fd is not None:
            return index, fd
    raise RuntimeError(f"all {SLOTS} process-node slots in {slot_dir()} are held by running nodes")
