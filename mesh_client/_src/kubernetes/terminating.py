"""SIGTERM still ends a controller, but only once the meshes it owns are deleted.

Python runs no atexit handlers when SIGTERM (the signal a deleted pod or a cancelled Job sends)
ends it, so a controller ended that way left its meshes, and their GPUs, until their leases
lapsed (:mod:`.lifetimes`). :func:`install`, called as this process first creates a mesh it
owns, sets a handler that deletes those meshes (:func:`.lifetimes.delete_owned`, at most
:data:`DELETE_SECONDS`), then restores the default disposition and raises SIGTERM again, so the
process still dies by that signal and its supervisor sees the same exit status. A controller
that is its container's first process (PID 1, ``python controller.py`` as the command) ignores
a signal at its default disposition, so the raised SIGTERM leaves it running, its meshes gone:
it exits then with status 143 (128 + SIGTERM, what a shell reports), atexit handlers run; before
this handler it ignored SIGTERM and was killed at the end of the pod's grace period. Only where the
handler can be set and nobody else set one: on the main thread, with SIGTERM at its default. A
program's own handler is never replaced; it decides how the program ends (an exit through
``sys.exit`` runs the atexit deletion). A process forked from it (a multiprocessing worker)
owns none of its meshes and gets SIGTERM back at its default (:func:`_fork_without_handler`): a
Python handler in a forked child loses a SIGTERM that comes before the child's interpreter is
ready for signals (``terminate()`` right after ``start()`` left the worker running).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

from mesh_client._src.kubernetes import lifetimes

#: How long SIGTERM's handler waits, in all, for the meshes' deletions before the process dies
#: (a pod gets 30 s by default between SIGTERM and SIGKILL; a deletion takes milliseconds).
DELETE_SECONDS = 10.0

_installed = False  # set once, on the main thread


def install() -> None:
    """Delete this process's meshes on SIGTERM, if SIGTERM is still at its default here."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return  # a signal handler can be set only on the main thread; a later spawn there may set it
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # the program's own handler (or SIG_IGN, or one set outside Python): left as it is
    signal.signal(signal.SIGTERM, _delete_meshes_then_die)
    os.register_at_fork(before=_block_sigterm, after_in_parent=_unblock_sigterm,
                        after_in_child=_fork_without_handler)
    _installed = True


def _block_sigterm() -> None:
    """Hold SIGTERM for the forking thread across the fork: the child inherits the mask, so a
    SIGTERM sent to it before it is ready waits for :func:`_fork_without_handler`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _unblock_sigterm() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _fork_without_handler() -> None:
    """In a forked child: SIGTERM at its default again (if still this module's handler), then
    let a held one in, which now ends the child as it would have without this module."""
    if signal.getsignal(signal.SIGTERM) is _delete_meshes_then_die:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _unblock_sigterm()


def _delete_meshes_then_die(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM meanwhile ends the process at once
    try:
        lifetimes.delete_owned(DELETE_SECONDS)
    finally:
        signal.raise_signal(signal.SIGTERM)  # dies by SIGTERM, as it would have without this handler
    # Still here: the first process of its PID namespace, to which the kernel delivers no
    # signal at its default disposition (raise included).
    sys.exit(128 + signum)
