"""How many cores this process may use: its affinity mask, and its cgroup's CPU quota."""

from __future__ import annotations

import os
from collections.abc import Callable


def cgroup_cpu_quota(proc_cgroup: str, read: Callable[[str], str | None], root: str = "/sys/fs/cgroup") -> float | None:
    """The CPUs that this process's cgroup may use (CFS quota over period), or None for no
    limit; ``proc_cgroup`` is ``/proc/self/cgroup``'s text and ``read(path)`` a file's text
    (None where missing). Looks in the process's own cgroup, then at the mount's root (which is
    the container's own cgroup where the container has a cgroup namespace or a bind mount)."""
    v2_path, v1_path = "", ""
    for line in proc_cgroup.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_path = path
    for directory in dict.fromkeys((v2_path.rstrip("/"), "")):  # own cgroup, then the root
        text = read(f"{root}{directory}/cpu.max")  # v2: "QUOTA PERIOD" or "max PERIOD"
        if text is not None:
            fields = text.split()
            if len(fields) == 2 and fields[0] != "max":
                return _ratio(fields[0], fields[1])
            return None
    for mount in ("cpu", "cpu,cpuacct"):  # v1
        for directory in dict.fromkeys((v1_path.rstrip("/"), "")):
            quota = read(f"{root}/{mount}{directory}/cpu.cfs_quota_us")
            period = read(f"{root}/{mount}{directory}/cpu.cfs_period_us")
            if quota is not None and period is not None:
                return _ratio(quota, period) if quota.strip() != "-1" else None
    return None


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def affinity_cores() -> int:
    """Cores this process may run on (its affinity mask, as a container's cpuset limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores this process may keep busy: its affinity, less where its cgroup's CPU quota
    allows fewer (a quota spent by busy threads throttles the whole container)."""
    cpus = affinity_cores()
    quota = cgroup_cpu_quota(_read("/proc/self/cgroup") or "", _read)
    return cpus if quota is None else max(1, min(cpus, int(quota)))
