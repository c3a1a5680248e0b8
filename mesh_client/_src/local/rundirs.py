"""The private directory of this host's unix links (:mod:`mesh_client._src.runtime.unixlinks`).

A controller makes one directory (0700) under ``$XDG_RUNTIME_DIR`` (else the temp directory)
the first time it starts procs or its own proc server, and removes it, with what is left in it,
when it exits. Its procs are given it in ``PROCMESH_UNIX_DIR`` (:mod:`.launcher`); a proc that
starts procs of its own passes the same one on, so every proc of the tree can reach every other
over AF_UNIX. Each proc server removes its own socket file when it stops, and the launcher
removes those of procs that were killed.

A controller that was killed cannot remove its directory: the next one on this host removes the
directories of controllers that are gone (their pid no longer runs in this pid namespace).
``PROCMESH_UNIX_LINKS=0`` turns unix links off: every link is TCP.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading

from mesh_client._src.runtime import unixlinks

SWITCH_ENV = "PROCMESH_UNIX_LINKS"
PREFIX = "pmunix-"
# pmunix-<pid namespace inode>-<pid>-<random>: the pid alone could be another namespace's.
_NAME = re.compile(r"^pmunix-(\d+)-(\d+)-[A-Za-z0-9_]+$")

_lock = threading.Lock()
_owned: str | None = None  # made by this process: removed at exit
_owner_pid = 0  # the process that made it (a fork of it must not remove it at its own exit)
_settled = False  # ensure() ran: its answer stands for the life of the process


def ensure() -> str | None:
    """This process's directory, made at the first call (adopted when an ancestor passed a
    private one); None when unix links are off or no directory can be made (then TCP only)."""
    global _owned, _owner_pid, _settled
    with _lock:
        if _settled:
            return unixlinks.directory()
        _settled = True
        if os.environ.get(SWITCH_ENV, "1") == "0":
            unixlinks.use_directory(None)
            return None
        if unixlinks.use_directory(os.environ.get(unixlinks.DIR_ENV)):
            return unixlinks.directory()
        base = _base()
        sweep(base)
        try:
            made = tempfile.mkdtemp(prefix=f"{PREFIX}{_namespace()}-{os.getpid()}-", dir=base)  # mode 0700
        except OSError:
            return None
        if unixlinks.path_for(("255.255.255.255", 65535), made) is None:  # too long for sun_path
            os.rmdir(made)
            return None
        _owned, _owner_pid = made, os.getpid()
        atexit.register(_remove_owned)
        unixlinks.use_directory(made)
        return made


def environment() -> dict[str, str]:
    """What a proc started from here needs in its environment to use the directory."""
    directory = ensure()
    return {unixlinks.DIR_ENV: directory} if directory else {}


def sweep(base: str) -> list[str]:
    """Remove directories under ``base`` that controllers of this pid namespace left when they
    were killed (their pid runs no more); returns what was removed."""
    removed: list[str] = []
    namespace = _namespace()
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        match = _NAME.match(name)
        if match is None or int(match.group(1)) != namespace:
            continue
        path = os.path.join(base, name)
        if not unixlinks.is_private(path) or _running(int(match.group(2))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _base() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        return runtime
    return tempfile.gettempdir()


def _namespace() -> int:
    """The inode of this process's pid namespace (0 where /proc does not say)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_owned() -> None:
    global _owned
    made, _owned = _owned, None
    if made is not None and os.getpid() == _owner_pid:
        with contextlib.suppress(OSError):
            shutil.rmtree(made)
