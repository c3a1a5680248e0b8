"""The reactor's timers, on a real reactor thread.

Aspects: a timer runs once after its delay; a cancelled one never runs and lets go of its
callback (and what the callback refers to) at once; many cancelled timers do not pile up.
"""

import gc
import threading
import weakref

from mesh_client._src.runtime import reactor


class Thing:
    pass


def test_a_timer_runs_once():
    loop = reactor.Reactor("test-timers")
    ran = threading.Event()
    loop.call_later(0.001, ran.set)
    assert ran.wait(10)


def test_a_cancelled_timer_never_runs_and_releases_its_callback():
    loop = reactor.Reactor("test-timers")
    thing = Thing()
    ran = []
    timer = loop.call_later(0.05, lambda t=thing: ran.append(t))
    timer.cancel()
    ref = weakref.ref(thing)
    del thing
    gc.collect()
    assert ref() is None  # nothing keeps it alive until the deadline
    later = threading.Event()
    loop.call_later(0.1, later.set)
    assert later.wait(10)
    assert ran == []


def test_cancelled_timers_are_purged_from_the_heap():
    loop = reactor.Reactor("test-timers")
    done = threading.Event()

    def on_thread():
        for _ in range(10 * reactor.Reactor.PURGE_AT):
            loop.call_later(3600, lambda: None).cancel()
        done.set()

    loop.call_soon(on_thread)
    assert done.wait(10)
    seen = threading.Event()
    sizes = []

    def measure():
        sizes.append(len(loop._timers))
        seen.set()

    loop.call_soon(measure)
    assert seen.wait(10)
    assert sizes[0] <= reactor.Reactor.PURGE_AT
