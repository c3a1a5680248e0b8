"""Background threads that must be out of TLS before the interpreter finalizes.

Python 3.11 ends a daemon thread that wakes during finalization (it asks for the GIL) with
``pthread_exit``. Where that thread wakes inside the ssl module, its HTTPS call to the API server
returning, the unwind aborts the whole process: exit status -6 (SIGABRT) and nothing on stderr,
after the program's last line (seen in CI; three threads calling the API server while the
program exits abort most runs). So each thread of ours that talks to the API server is
registered here with a way to stop it, and one atexit handler stops them all and waits for each
to end, :data:`EXIT_WAIT_SECONDS` at most in all. The handler is registered again with each
thread, so it runs before the exit handlers registered earlier: among them the Kubernetes
client's removal of the CA file it wrote from the kubeconfig, after which each new connection of
these threads fails.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable

#: How long the interpreter's exit waits, in all, for the registered threads to end. Each stops
#: at once when told unless it is inside one API call, which takes milliseconds.
EXIT_WAIT_SECONDS = 10.0

_halts: dict[threading.Thread, Callable[[], None]] = {}
_lock = threading.Lock()


def track(thread: threading.Thread, halt: Callable[[], None]) -> None:
    """End ``thread`` before the interpreter finalizes; ``halt()`` tells it to stop (it must
    not block)."""
    with _lock:
        for ended in [t for t in _halts if t.ident is not None and not t.is_alive()]:
            del _halts[ended]
        _halts[thread] = halt
        atexit.unregister(end_all)
        atexit.register(end_all)


def end_all(wait: float = EXIT_WAIT_SECONDS) -> list[threading.Thread]:
    """Tell every registered thread to stop, then wait for them (``wait`` seconds in all);
    the ones still running after that."""
    with _lock:
        tracked = list(_halts.items())
        _halts.clear()
    for _, halt in tracked:
        try:
            halt()
        except Exception:  # one thread's stop must not keep the others running
            pass
    deadline = time.monotonic() + wait
    running = []
    for thread, _ in tracked:
        if thread.ident is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            running.append(thread)
    return running
