"""Unmount what a real node left mounted under its folders (volumes, rootfs, shm, netns files).

The kubelet and containerd run in the host's mount namespace, so their mounts outlive them
when they are killed. :func:`unmount_under` reads /proc/self/mountinfo and detaches every mount
below the given folders, deepest first. Used by :mod:`tests.cluster.real_node.node`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def under(*folders: Path) -> list[str]:
    """Mount points at or below any of ``folders``."""
    roots = [str(Path(f).resolve()) for f in folders]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if any(point == r or point.startswith(r + "/") for r in roots):
            found.append(point)
    return found


def unmount_under(*folders: Path) -> None:
    """Lazily unmount everything below ``folders``; raise if something stays mounted."""
    for _ in range(5):  # stacked mounts on one point take one round each
        points = under(*folders)
        if not points:
            return
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    left = under(*folders)
    if left:
        raise RuntimeError(f"still mounted after unmounting: {left[:5]}")
