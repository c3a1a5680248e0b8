"""The host-wide kernel tunables the kubelet insists on, saved before it runs and restored after.

At start the kubelet either sets ``vm.overcommit_memory=1``, ``kernel.panic=10``,
``kernel.panic_on_oops=1`` (and checks two key quotas), or with ``protectKernelDefaults`` refuses
to start unless they already have those values: there is no third way. These are the only
settings of a real node that are not confined to its namespace, cgroups or folders, so
:func:`save` records the machine's values once (the first real node of the machine) and
:func:`restore` puts them back when the last real node of the machine stops. Used by
:mod:`tests.cluster.real_node.node` and :mod:`tests.cluster.real_node.cluster`.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: What the kubelet writes (pkg/kubelet/cm setupKernelTunables), as /proc/sys paths.
KUBELET_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                    "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
STATE = Path("/run/procmesh/kernel-tunables.json")


@contextmanager
def _locked() -> Iterator[None]:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    with open(STATE.parent / "kernel-tunables.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def save() -> None:
    """Record the machine's values, unless a running real node recorded them already."""
    with _locked():
        if not STATE.exists():
            values = {t: Path("/proc/sys", t).read_text().strip() for t in KUBELET_TUNABLES}
            STATE.write_text(json.dumps(values, indent=2))


def restore(other_nodes_running: bool) -> None:
    """Put the recorded values back, once no other real node of the machine runs."""
    with _locked():
        if other_nodes_running or not STATE.exists():
            return
        for tunable, value in json.loads(STATE.read_text()).items():
            Path("/proc/sys", tunable).write_text(value + "\n")
        STATE.unlink()
