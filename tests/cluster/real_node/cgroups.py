"""The cgroup subtree of one real node: made before its daemons start, emptied and removed at the end.

This machine mounts cgroup v1 hierarchies (cpu, memory, pids, ...; plus the cgroup2 "unified"
one of a hybrid setup). A node's daemons (containerd, its shims, the kubelet, kube-proxy) and,
through the kubelet's ``cgroupRoot``, all its pods live under one cgroup ``/<name>`` in every
hierarchy. So :func:`kill_all` finds every process the node ever started, shims and containers
included, whatever their parents did; :func:`remove` then deletes the folders, deepest first.
Used by :mod:`tests.cluster.real_node.node`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: Processes that keep appearing (a restart loop) are killed again, this many rounds at most.
KILL_ROUNDS = 50


def hierarchies() -> list[Path]:
    """Mount points of every cgroup hierarchy (v1 and v2) of this machine."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype = right.split()[0]
        if fstype in ("cgroup", "cgroup2"):
            found.append(Path(left.split()[4]))
    return found


def _folders(name: str) -> list[Path]:
    return [h / name.strip("/") for h in hierarchies()]


def create(name: str, *children: str) -> None:
    """Make ``/<name>`` (and ``/<name>/<child>``) in every hierarchy."""
    for folder in _folders(name):
        for target in (folder, *(folder / c for c in children)):
            target.mkdir(exist_ok=True)
            # A new v1 cpuset starts with no CPUs and no memory nodes: inherit the parent's.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                mine, parents = target / knob, target.parent / knob
                if mine.exists() and not mine.read_text().strip():
                    mine.write_text(parents.read_text())


def join(name: str, pid: int) -> None:
    """Move ``pid`` into ``/<name>`` of every hierarchy."""
    for folder in _folders(name):
        (folder / "cgroup.procs").write_text(f"{pid}\n")


def pids(name: str) -> set[int]:
    """Every process in the subtree ``/<name>``, across hierarchies."""
    found: set[int] = set()
    for folder in _folders(name):
        if not folder.exists():
            continue
        for procs in folder.rglob("cgroup.procs"):
            try:
                found.update(int(p) for p in procs.read_text().split())
            except OSError:
                pass
    return found


def kill_all(name: str) -> None:
    """SIGKILL every process of the subtree until it is empty (bounded rounds)."""
    for _ in range(KILL_ROUNDS):
        left = pids(name)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"processes keep appearing in cgroup /{name}: {sorted(pids(name))}")


def remove(name: str) -> None:
    """Delete the (empty) subtree ``/<name>`` in every hierarchy, deepest folders first."""
    for folder in _folders(name):
        if not folder.exists():
            continue
        for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            sub.rmdir()
        folder.rmdir()
