"""Waking ahead of a message that is due, so that the threads that handle it are awake when it comes.

A thread that slept through a long wait (a 25 ms GPU step) pays its wake-up when the message
comes, and where idle cores halt (a virtual machine's vCPU halts to its host) that costs 50 to
110 us a thread. A call crosses four such waits (:mod:`.waits`), so the call around a 25 ms step
cost 0.66-0.85 ms on the lent GPU machines where a no-op call's round trip is about 0.05 ms, and
keeping every core busy cut it by half (``benchmarks/results/gpu_sharing.md``). Spinning through
every step would do that at a core per waiting thread; this spins only around the moment a
message is due, :data:`.waits.WAKE_AHEAD_NS` (``PROCMESH_WAKE_AHEAD_US``) on either side of it:

- a caller whose recent waits for a reply from the same endpoint were long expects this one to be
  as long as the shortest of them (a loop of steps repeats itself, and a loop that takes turns,
  a policy's 10 ms generate then a trainer's 25 ms train, repeats each): it sleeps until the
  wake-ahead before that, then wakes its process's I/O thread, and both spin until the reply
  comes, twice the wake-ahead at most;
- a coroutine that awaits a reply does the same through its I/O thread's timer (its event loop
  cannot spin: the I/O thread alone is awake when the reply comes);
- an actor's thread that waits for its ``async def`` endpoint to end on the actor's loop does
  the same for that endpoint's end (:func:`wait_on`), without the I/O thread (no message comes);
- an actor whose call ran long, once the reply is out, wakes its proc's I/O thread, and the
  actor's thread, if it sent the reply, spins with it up to twice the wake-ahead for the next call
  (a loop's next step follows its reply closely); a reply sent later, from the actor's loop (a
  concurrent endpoint) or through a port (from whichever thread sends it), wakes the I/O thread
  alone (an event loop cannot spin, and the actor's thread may be busy with the next call).

A wait's expectation is kept per what it waits for (a *key*: an endpoint of an actor mesh, see
:mod:`mesh_client._src.actor.actor_mesh`; the last :data:`KEYS_KEPT` of them per thread); a
future without a key (one made elsewhere) shares its thread's own.

Waits shorter than :data:`LONG_WAITS` wake-aheads are left to the usual spins: there the
threads are awake anyway, or a spin would cost much of the wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

from mesh_client._src.runtime import reactor, waits

#: A wait counts as long, so that the next one wakes ahead, from this many wake-aheads: each
#: thread then spins at most a fifth of the wait.
LONG_WAITS = 10


#: A wait for a reply is expected to last as long as the shortest of the last few of its kind:
#: one that woke ahead is shorter than one that did not, and expecting the last one alone
#: would wake the next too late, every other time.
RECENT_WAITS = 4

#: How many keys (endpoints) a thread keeps the recent waits of, the least recently waited for
#: going first: a loop calls a few endpoints in turn; a program that calls many keeps a bounded
#: memory.
KEYS_KEPT = 16


class _Recent(threading.local):
    def __init__(self) -> None:
        self.waits: list[int] = []  # this thread's last waits without a key, in ns; emptied by a short one
        # By key, least recently waited for first: the last waits for it (never empty: a short
        # one removes its key).
        self.keyed: dict[Hashable, list[int]] = {}


_recent = _Recent()

#: How many times this process has woken ahead (a caller's wait, an actor's wait for its async
#: endpoint, or an actor's after a long call): what a benchmark reads to tell whether the waits
#: it measured woke ahead.
woken = 0


def due(started_ns: int, key: Hashable | None = None) -> int:
    """When (``time.monotonic_ns``) a wait for a reply that began at ``started_ns`` should wake
    ahead, or 0 if it should not (the last wait of its ``key``, or of its thread for a wait
    without one, was short, or waking ahead is off)."""
    recent = _recent.waits if key is None else _recent.keyed.get(key)
    return started_ns + min(recent) - waits.WAKE_AHEAD_NS if recent else 0


def _long(ns: int) -> bool:
    """Whether a wait (or a call) of ``ns`` is long enough for the next to wake ahead (never
    where waking ahead is off)."""
    ahead = waits.WAKE_AHEAD_NS
    return ahead > 0 and ns >= LONG_WAITS * ahead


def waited(started_ns: int, key: Hashable | None = None) -> None:
    """A wait for a reply that began at ``started_ns`` has ended: the next ones of its ``key``
    (of its thread, without one) expect as long."""
    took = time.monotonic_ns() - started_ns
    if key is None:
        recent = _recent.waits
        if not _long(took):
            recent.clear()
            return
    else:
        keyed = _recent.keyed
        if not _long(took):
            if keyed:
                keyed.pop(key, None)
            return
        found = keyed.pop(key, None)  # back in last: the most recently waited for
        if found is None and len(keyed) >= KEYS_KEPT:
            del keyed[next(iter(keyed))]
        recent = keyed[key] = found or []
    recent.append(took)
    if len(recent) > RECENT_WAITS:
        del recent[0]


def wake_io() -> int:
    """A message is due about now: wake this process's I/O thread to spin for it; returns how long
    the thread asking should spin (ns, whatever its recent waits were)."""
    global woken
    woken += 1
    spin = 2 * waits.WAKE_AHEAD_NS
    reactor.get_reactor().wake_ahead(time.monotonic_ns() + spin)
    return spin


def wake_io_at(when_ns: int) -> reactor.Timer:
    """Have this process's I/O thread wake itself at ``when_ns`` (``time.monotonic_ns``) and
    spin for a message due then: for an ``await``, whose event loop cannot spin (it is woken
    from the I/O thread as before)."""
    def wake() -> None:  # on the I/O thread itself
        wake_io()

    return reactor.get_reactor().call_later(max(0, when_ns - time.monotonic_ns()) / 1e9, wake)


def after_long_work(seconds: float) -> int:
    """An actor's call took ``seconds`` and its reply is out: if that was long, wake the I/O
    thread to spin for the next call and return how long the actor's thread should spin for it
    (ns; a reply sent later, from the actor's loop or through a port, ignores it); else 0."""
    return wake_io() if _long(int(seconds * 1e9)) else 0


def wait_on(bell: waits.Bell, done: Callable[[], bool], key: Hashable) -> None:
    """Wait on ``bell`` (rung when ``done()`` turns true) for something of ``key`` another
    thread of this process completes: an actor's thread waiting for its ``async def`` endpoint
    on the actor's loop. As a caller's wait, it wakes ahead of the end its recent waits for
    ``key`` expect and spins for it, up to twice the wake-ahead; no I/O thread is woken (no
    message is due: the reply goes out from this thread once it is done)."""
    global woken
    started = time.monotonic_ns()
    wake_at = due(started, key)
    spin_until = 0
    while not done():
        if wake_at:
            left = wake_at - time.monotonic_ns()
            if (left > 0 and bell.wait(left / 1e9, waits.SPIN_NS, True)) or done():
                continue  # rung (perhaps by an earlier ring): look again
            wake_at = 0
            woken += 1
            spin_until = time.monotonic_ns() + 2 * waits.WAKE_AHEAD_NS
        elif spin_until:  # woken ahead: spin what is left of the window, then sleep
            bell.wait(None, max(spin_until - time.monotonic_ns(), 0), False)
        else:
            bell.wait(None, waits.SPIN_NS)
    waited(started, key)
