"""The call path's optional C modules, imported here and nowhere else: ``_waits`` (the spinning
waits of :mod:`.waits` and the reactor's poll) and ``_sends`` (the frame write of :mod:`.streams`
whose count survives a Ctrl-C); and what the wire's own, ``_frames`` (the per-message frame work,
:mod:`mesh_client._src.wire.native`), did.

``pip install`` builds them where it finds a C compiler and goes on without them where it does
not (pyproject.toml), so an install on a slim machine works, only slower, and would say nothing:
:func:`warn_if_missing` warns once per process, when the backends make the program's first proc
mesh; never in a proc server, whose lines reach the same terminal (the program that started it
warns for the install).
"""

from __future__ import annotations

import sys
import threading
import warnings
from types import FrameType, ModuleType

from mesh_client._src.wire import native as wire_native

waits_module: ModuleType | None
sends_module: ModuleType | None
#: The names of the modules that did not load (empty: both did).
missing: list[str] = []

#: The ``API`` of the ``_waits`` these sources call; one built from older sources (a checkout
#: pulled and not reinstalled) is left unused, as a missing one.
WAITS_API = 2

try:
    from mesh_client._src.runtime import _waits as waits_module
except ImportError:  # built without a C compiler: everything works, nothing spins
    waits_module = None
if waits_module is None or getattr(waits_module, "API", 1) != WAITS_API:
    waits_module = None
    missing.append("_waits")
try:
    from mesh_client._src.runtime import _sends as sends_module
except ImportError:  # a write a Ctrl-C cuts short then breaks its link
    sends_module = None
    missing.append("_sends")
if wire_native.frames is None:  # the wire parses and packs each message in Python
    missing.append("_frames")

#: What the missing modules cost (benchmarks/results/actors.md, 2026-12-07, the 16-core host: a
#: call_one's median 75-84 us in a run without them, 47.5 us with them).
SLOWDOWN = "about 1.6x as long on a host of 8 cores or more"

_warned = threading.Lock()  # taken once, by the one warning (or by a proc server), never released


def message(names: list[str]) -> str:
    """The warning for ``names`` missing: what, the cost, and what to do."""
    return (f"procmesh: the native call-path modules {', '.join(names)} are not built, did not load or were "
            "built from older sources (an "
            "install without a C compiler builds none), so calls run in pure Python: their waits never "
            f"spin, calls take {SLOWDOWN}, and a Ctrl-C during a call's write breaks its connection. "
            "Install a C compiler (gcc) and reinstall procmesh (in a checkout: pip install --no-deps -e .), "
            "or run the program in the procmesh proc-server image, which has them")


def warn_if_missing() -> None:
    """Warn (a RuntimeWarning) the first time in this process that a native module is missing;
    nothing where both loaded or once warned. Called by the backends on each mesh they make, and
    by an async spawn or attach before the thread it waits on (whose stack holds no line of the
    user's)."""
    if not missing or not _warned.acquire(blocking=False):
        return
    warnings.warn(message(missing), RuntimeWarning, stacklevel=_outside_procmesh())


def never_warn() -> None:
    """This process is a proc server: it never warns. A mesh its actor makes would say again, in
    the program's terminal, what the program's own first mesh said."""
    _warned.acquire(blocking=False)


def _outside_procmesh() -> int:
    """The ``stacklevel`` of the first caller outside mesh_client (the user's spawn_procs), so the
    warning names the user's line."""
    frame: FrameType | None = sys._getframe(2)  # 0 is this function, 1 warn_if_missing
    level = 2
    while frame is not None and str(frame.f_globals.get("__name__")).startswith("mesh_client."):
        frame, level = frame.f_back, level + 1
    return level
