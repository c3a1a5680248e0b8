"""The exec shim that turns a process into a container: ``python sandbox.py <spec.json>``.

Run by :mod:`.containers` (and by exec probes) as the first process of each container, by file
path and with ``-E -s`` so it imports nothing of ours and starts fast. It asks to be killed when
its parent (the node agent) dies, enters a private mount namespace, bind-mounts the pod's volumes
at their paths (read-only where asked), changes folder and execs the command with exactly the
given environment. The spec is JSON: ``{"argv": [...], "env": {...}, "cwd": str|null,
"mounts": [{"source", "target", "read_only"}]}``. Needs root (CAP_SYS_ADMIN) when there are mounts.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, flags: int) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), None, flags, None),
           f"mount {source} on {target}")


def _enter_mounts(mounts: list[dict[str, object]]) -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Nothing we mount may propagate back to the host's namespace.
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for mount in sorted(mounts, key=lambda m: len(str(m["target"]))):
        source, target = str(mount["source"]), str(mount["target"])
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount(source, target, MS_BIND | MS_REC)
        if mount.get("read_only"):
            _mount(None, target, MS_BIND | MS_REMOUNT | MS_RDONLY)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        if spec.get("mounts"):
            _enter_mounts(spec["mounts"])
        if spec.get("cwd"):
            os.makedirs(spec["cwd"], exist_ok=True)
            os.chdir(spec["cwd"])
    except OSError as error:
        print(f"procmesh sandbox: {error}", file=sys.stderr, flush=True)
        os._exit(128)
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as error:
        print(f"procmesh sandbox: exec {argv[0]!r}: {error.strerror}", file=sys.stderr, flush=True)
        os._exit(127 if isinstance(error, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv[1])
