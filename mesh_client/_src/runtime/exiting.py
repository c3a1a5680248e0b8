"""Background threads that must be out of TLS before the interpreter finalizes.

Python 3.11 ends a daemon thread that wakes during finalization (it asks for the GIL) with
``pthread_exit``. Where that thread wakes inside the ssl module, its HTTPS call to the API server
returning, the unwind aborts the whole process: exit status -6 (SIGABRT) and nothing on stderr,
after the program's last line (seen in CI; three threads calling the API server while the
program exits abort most runs). So each thread of ours that may be in such a call is registered
here with a way to stop it, and one atexit handler stops them all and waits for each to end,
:data:`EXIT_WAIT_SECONDS` at most in all.

The handler is registered when this module is imported (with ``mesh_client``), so it runs after
the program's own exit handlers, which may still call actors. Exit work that would break the
threads' calls, such as the Kubernetes client's removal of the CA file it wrote from the
kubeconfig, is moved behind it with :func:`after_threads`.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable

#: How long the interpreter's exit waits, in all, for the registered threads to end. Each stops
#: at once when told unless it is inside one API call, which takes milliseconds.
EXIT_WAIT_SECONDS = 10.0

_ROUNDS = 4  # threads registered while others end (a relink's port-forward) are ended too, this many times over


class Exits:
    """Registered threads and deferred exit functions; :data:`EXITS` is the process's, run at exit."""

    def __init__(self) -> None:
        self._halts: dict[threading.Thread, Callable[[], None]] = {}
        self._after: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._prune_at = 64  # size at which ended threads are dropped (doubles: amortized O(1) per track)

    def track(self, thread: threading.Thread, halt: Callable[[], None]) -> None:
        """End ``thread`` before the interpreter finalizes; ``halt()`` tells it to stop (it
        must not block)."""
        with self._lock:
            if len(self._halts) >= self._prune_at:
                for ended in [t for t in self._halts if t.ident is not None and not t.is_alive()]:
                    del self._halts[ended]
                self._prune_at = max(64, 2 * len(self._halts))
            self._halts[thread] = halt

    def tracks(self, thread: threading.Thread) -> bool:
        return thread in self._halts

    def halt_of(self, thread: threading.Thread) -> Callable[[], None] | None:
        return self._halts.get(thread)

    def after_threads(self, exit_function: Callable[[], object]) -> None:
        """Run ``exit_function``, an atexit handler already registered, after the threads
        ended rather than at its own place among the exit handlers."""
        atexit.unregister(exit_function)
        with self._lock:
            if exit_function not in self._after:
                self._after.append(exit_function)

    def end_all(self, wait: float = EXIT_WAIT_SECONDS) -> list[threading.Thread]:
        """Tell every registered thread to stop, then wait for them (``wait`` seconds in all);
        the ones still running after that. Threads registered meanwhile are ended too."""
        deadline = time.monotonic() + wait
        running: list[threading.Thread] = []
        for _ in range(_ROUNDS):
            with self._lock:
                tracked = list(self._halts.items())
                self._halts.clear()
            if not tracked:
                break
            for _, halt in tracked:
                try:
                    halt()
                except Exception:  # one thread's stop must not keep the others running
                    pass
            for thread, _ in tracked:
                if thread.ident is not None and thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    running.append(thread)
        return running

    def run(self) -> None:
        """The exit: end the threads, then the exit functions moved behind them."""
        self.end_all()
        with self._lock:
            after, self._after[:] = list(self._after), []
        for exit_function in after:
            try:
                exit_function()
            except Exception:
                pass


EXITS = Exits()
track = EXITS.track
after_threads = EXITS.after_threads
atexit.register(EXITS.run)
