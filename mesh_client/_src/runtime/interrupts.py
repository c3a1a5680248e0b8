"""A Ctrl-C that the client's wait loops never lose.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT's handler runs, and
does not always deliver it: one raised inside a finalizer (``__del__``, which the HTTP client's
responses have) is printed as "Exception ignored" and dropped, and in CI ``attach`` went on
polling after a SIGINT with no trace at all (1 run in 50 to 200, with its polls made tight).
While :func:`kept` is active, SIGINT is also recorded, and :func:`check`, which the waits call
between polls (:func:`mesh_client._src.runtime.offloading.sleep`), raises the interrupt that did
not arrive. Only where SIGINT is Python's default (the main thread, no handler of the user's).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

_caught = False  # a SIGINT arrived while kept() was active (only the main thread touches it)
_before_raise: list[Callable[[], object]] = []  # of the active kept(), innermost last


def _record_and_raise(signum: int, frame: FrameType | None) -> None:
    global _caught
    _caught = True
    for hook in reversed(_before_raise):
        try:
            hook()  # e.g. end the progress line, so the traceback starts on a line of its own
        except Exception:  # noqa: BLE001 - a hook's failure must not replace the interrupt
            pass
    raise KeyboardInterrupt


@contextlib.contextmanager
def kept(before_raise: Callable[[], object] | None = None) -> Iterator[None]:
    """Record SIGINT during the block; ``before_raise`` runs first when it arrives."""
    global _caught
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    current = signal.getsignal(signal.SIGINT)
    install = current is signal.default_int_handler
    if not install and current is not _record_and_raise:  # ignored, or the user's own handler
        yield
        return
    if before_raise is not None:
        _before_raise.append(before_raise)
    if install:
        signal.signal(signal.SIGINT, _record_and_raise)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGINT, current)
            _caught = False
        if before_raise is not None:
            _before_raise.remove(before_raise)


def check() -> None:
    """Raise the ``KeyboardInterrupt`` of a recorded SIGINT that did not end the wait."""
    global _caught
    if _caught and threading.current_thread() is threading.main_thread():
        _caught = False
        raise KeyboardInterrupt
