"""How the threads of a call wait for each other: bells, mailboxes, and how long to spin.

A call crosses four waits: the proc's I/O thread for the request, the actor's thread for its
work, the caller's I/O thread for the reply and the caller's thread for its future. A thread
that sleeps there is woken through the kernel, and waking an idle core costs a many-core host
about as much as the socket hop itself (issue 14's breakdown: 10 us for the hand-off from the
proc's I/O thread to the actor's, with no socket in between). So each wait first spins for
:data:`SPIN_NS` (the I/O thread's poll for :data:`POLL_SPIN_NS`) with the GIL released (the
native :mod:`._waits`), then sleeps.

The reactor rings the bells of what it woke only once it has released the GIL (it hands
:func:`deferred` to its poll): a woken thread then finds the GIL free, instead of waking, finding
it held and sleeping on it again.

How long to spin: ``PROCMESH_SPIN_US`` (microseconds, every wait; 0 turns spinning off) and
``PROCMESH_POLL_SPIN_US`` (the I/O thread's poll alone, over the first). By
default every wait spins where the process may use :data:`SPIN_MIN_CPUS` cores or more. With
fewer (but two or more) only the I/O thread's poll spins (:data:`SMALL_HOST_POLL_SPIN_US`): one
spinner per process leaves a core to the thread it hands work to, where spinning actors and
callers took the cores the threads they wait for needed. What a process may use counts its
cgroup's CPU quota (a pod's CPU limit, :mod:`.cores`), since a quota that spinning spends
throttles the whole container. Without the native module (a build without a C compiler) every
wait sleeps at once, as plain locks.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Generic, NamedTuple, Protocol, TypeVar

from mesh_client._src.runtime import cores, natives

T = TypeVar("T")

#: Spinning is on by default only with at least this many usable cores.
SPIN_MIN_CPUS = 8
#: The longest spin ``PROCMESH_SPIN_US`` may ask for (a second: longer only burns a core).
MAX_SPIN_US = 1_000_000
#: The default spin where spinning is on, in microseconds: a call_one's waits on a many-core
#: host are far shorter than this, and so are a 1 MiB echo's (about 200 us for a transfer): on
#: the 16-core host 100 us met the call_one target and not the echo's, 250 us met both narrowly,
#: 500 us both with room (benchmarks/results/actors.md, 2026-12-05).
DEFAULT_SPIN_US = 500
#: The I/O thread's spin where a process may use 2 to SPIN_MIN_CPUS - 1 cores (none below 2):
#: on the 2-core VM a call_one's round trip is 50-130 us, so a 100 us spin catches the next
#: message in a sequential caller's loop. There it halved call_one (123-133 -> 52-57 us median)
#: at no extra CPU per call, fan-out, pipelined and the 1 MiB echo unchanged, where spinning
#: every wait gained less (74 us) and cost 12-22 us of CPU a side (benchmarks/results/actors.md,
#: 2026-12-06).
SMALL_HOST_POLL_SPIN_US = 100
#: How far ahead of a reply that is due (:mod:`.ahead`) the threads that handle it wake, in
#: microseconds: more than waking a halted vCPU takes (50-110 us a thread on the lent GPU
#: machines, benchmarks/results/gpu_sharing.md), and each thread spins at most twice this.
DEFAULT_WAKE_AHEAD_US = 300


class Bell(Protocol):
    """An auto-reset event: ``ring()`` makes one ``wait()`` return (at once if nobody waits yet;
    rings meanwhile merge). ``wait`` may return for an earlier ring: callers loop on their own
    condition."""

    def ring(self) -> None: ...
    def wait(self, timeout: float | None = None, spin_ns: int = 0, paced: bool = True, /) -> bool: ...  # positional, as the native one


class _LockBell:
    """The bell where the native module is missing: a lock held while unrung, no spinning."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def ring(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:
            pass  # rung already: rings merge

    def wait(self, timeout: float | None = None, spin_ns: int = 0, paced: bool = True, /) -> bool:
        if timeout is None or timeout < 0:
            return self._lock.acquire()
        # A lock refuses what time_t cannot hold (get(timeout=math.inf)); the native bell caps it.
        return self._lock.acquire(timeout=min(timeout, threading.TIMEOUT_MAX))


#: The native waits (:mod:`.natives`); None where the install built none: everything works,
#: nothing spins.
native: ModuleType | None = natives.waits_module

make_bell: Callable[[], Bell] = native.Bell if native is not None else _LockBell


class Spins(NamedTuple):
    """How long a process's waits spin, in nanoseconds: a thread's wait for another thread (an
    actor's mailbox, a caller's future) and the I/O thread's poll of its sockets."""

    wait_ns: int
    poll_ns: int


def spins_from(environ: Mapping[str, str], cpus: int) -> Spins:
    """The spins for a process: ``PROCMESH_SPIN_US`` for every wait if set, and
    ``PROCMESH_POLL_SPIN_US`` for the I/O thread's poll alone if set (over the first); else
    :data:`DEFAULT_SPIN_US` for every wait with :data:`SPIN_MIN_CPUS` cores or more,
    :data:`SMALL_HOST_POLL_SPIN_US` for the poll alone with 2 or more, nothing below."""
    if cpus >= SPIN_MIN_CPUS:
        spins = Spins(DEFAULT_SPIN_US * 1000, DEFAULT_SPIN_US * 1000)
    else:
        spins = Spins(0, SMALL_HOST_POLL_SPIN_US * 1000 if cpus >= 2 else 0)
    every = _spin_setting(environ, "PROCMESH_SPIN_US")
    if every is not None:
        spins = Spins(every, every)
    poll = _spin_setting(environ, "PROCMESH_POLL_SPIN_US")
    if poll is not None:
        spins = Spins(spins.wait_ns, poll)
    return spins


def wake_ahead_from(environ: Mapping[str, str], spins: Spins) -> int:
    """How far ahead of a reply that is due its threads wake, in ns (:mod:`.ahead`):
    ``PROCMESH_WAKE_AHEAD_US`` if set, else :data:`DEFAULT_WAKE_AHEAD_US` where the I/O
    thread's poll spins at all (a host of 2 cores or more, spinning not turned off), else 0."""
    ahead = _spin_setting(environ, "PROCMESH_WAKE_AHEAD_US",
                          "the microseconds ahead of a reply that is due its waiting threads wake (0 turns it off)")
    if ahead is not None:
        return ahead
    return DEFAULT_WAKE_AHEAD_US * 1000 if spins.poll_ns > 0 else 0


def _spin_setting(environ: Mapping[str, str], name: str,
                  meaning: str = "the microseconds a waiting thread spins before it sleeps (0 turns spinning off)",
                  ) -> int | None:
    """The nanoseconds of the spin setting ``name`` (given in microseconds), if set."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    try:
        micros = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number: give {meaning}") from None
    if not 0 <= micros <= MAX_SPIN_US:  # NaN fails this too
        raise ValueError(f"{name}={raw!r} is out of range: give 0 to {MAX_SPIN_US} microseconds")
    return int(micros * 1000)


#: How long this process's thread waits (mailboxes, futures) and its I/O thread's polls spin, in
#: nanoseconds (0 without the native module); read at each wait, so :func:`configure` in a
#: forked proc takes effect.
SPIN_NS = 0
POLL_SPIN_NS = 0
#: How far ahead of a reply that is due this process's threads wake (:mod:`.ahead`), in ns; 0: they do not.
WAKE_AHEAD_NS = 0


def configure() -> None:
    """Set :data:`SPIN_NS`, :data:`POLL_SPIN_NS` and :data:`WAKE_AHEAD_NS` from this process's
    environment and CPUs: at import, and again in a proc forked from the zygote once it has its
    own environment."""
    global SPIN_NS, POLL_SPIN_NS, WAKE_AHEAD_NS
    if native is None:  # nothing spins: a wake ahead would only sleep again
        SPIN_NS, POLL_SPIN_NS, WAKE_AHEAD_NS = 0, 0, 0
        return
    spins = spins_from(os.environ, cores.usable_cores())
    SPIN_NS, POLL_SPIN_NS = spins
    WAKE_AHEAD_NS = wake_ahead_from(os.environ, spins)


configure()


class _Deferred(threading.local):
    rings: list[Bell] | None = None


_deferred = _Deferred()


def ring(bell: Bell) -> None:
    """Ring ``bell``: now, or on the reactor's thread when its poll has released the GIL."""
    rings = _deferred.rings
    if rings is None:
        bell.ring()
    else:
        rings.append(bell)


def deferred() -> list[Bell]:
    """Make this thread (the reactor's) defer its rings; returns the list its poll rings and
    empties."""
    rings: list[Bell] = []
    _deferred.rings = rings
    return rings


def flush() -> None:
    """Ring now what this thread deferred: before it runs code that may block (a done-callback,
    a callback or timer of the reactor), which might wait for a thread it has yet to wake."""
    rings = _deferred.rings
    if rings:
        for bell in rings:
            bell.ring()
        rings.clear()


def _forget_deferral_in_child() -> None:
    # A fork from the reactor's thread leaves its deferral on the child's only thread.
    _deferred.rings = None


os.register_at_fork(after_in_child=_forget_deferral_in_child)


class _Own(threading.local):
    bell: Bell | None = None
    depth = 0  # waits on the bell in progress: two where a signal handler's wait interrupted one


_own = _Own()


def own_bell() -> Bell:
    """This thread's bell, for waits on something another thread completes (a future)."""
    bell = _own.bell
    if bell is None:
        bell = _own.bell = make_bell()
    return bell


def enter_own_wait() -> Bell:
    """This thread's bell, for a wait that ends with :func:`leave_own_wait` (counted last: a
    KeyboardInterrupt before the caller's ``try`` would leave the count one too high)."""
    bell = own_bell()
    _own.depth += 1
    return bell


def leave_own_wait(bell: Bell) -> None:
    """End a wait on this thread's bell. A wait nested in another (a signal handler's, or a
    finalizer's, run while the thread waited) may have taken the ring meant for the one it
    interrupted, wherever that one was (spinning, asleep, about to wait):
    ring again, so that one looks at its condition once more instead of sleeping for good."""
    _own.depth -= 1
    if _own.depth:
        bell.ring()


class Mailbox(Generic[T]):
    """A queue with one reader (an actor's thread): ``put`` from any thread, ``get`` spins,
    then sleeps, until an item is there."""

    __slots__ = ("_items", "_bell")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._bell = make_bell()

    def put(self, item: T) -> None:
        self._items.append(item)
        ring(self._bell)

    def put_first(self, item: T) -> None:
        """Queue ``item`` ahead of every other: the next one the reader gets."""
        self._items.appendleft(item)
        ring(self._bell)

    def empty(self) -> bool:
        return not self._items

    def drain(self) -> list[T]:
        """Take every item queued now (the reader has stopped reading: its leftovers)."""
        items = self._items
        taken = []
        while items:
            taken.append(items.popleft())
        return taken

    def get(self, spin_ns: int = 0) -> T:
        """The next item; ``spin_ns``: its waits spin for that long from now whatever the recent
        waits were (an item is due soon: :mod:`.ahead`), else :data:`SPIN_NS` while they were
        short. A ring left from an item taken without waiting ends a wait early: the spin goes on."""
        items = self._items
        spin_until = time.monotonic_ns() + spin_ns if spin_ns else 0
        while True:
            try:
                return items.popleft()
            except IndexError:
                left = spin_until - time.monotonic_ns() if spin_until else 0
                if left > 0:
                    self._bell.wait(None, left, False)
                else:
                    self._bell.wait(None, SPIN_NS)
