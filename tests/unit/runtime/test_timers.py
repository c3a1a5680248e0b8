"""The reactor's timers and its order of service, on a real reactor thread.

Aspects: a timer runs once after its delay; a cancelled one never runs and lets go of its
callback (and what the callback refers to) at once; many cancelled timers do not pile up;
handlers marked prioritized are served first among those ready together, and the others at
most OTHERS_PER_PASS per pass.
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


class Recording:
    def __init__(self, name, sock, order, prioritized):
        self.name, self.sock, self.order, self.prioritized = name, sock, order, prioritized

    def fileno(self):
        return self.sock.fileno()

    def on_readable(self):
        self.sock.recv(16)
        self.order.append(self.name)


def _finish(loop, handlers, pairs):
    """Unregister, then close: a handler left on a socket whose peer is gone is ready for good,
    and its loop (a daemon thread, never stopped) would spin on it for the rest of the run."""
    for h in handlers:
        loop.unregister(h)
    unregistered = threading.Event()
    loop.call_soon(unregistered.set)
    assert unregistered.wait(10)
    for pair in pairs:
        for sock in pair:
            sock.close()


def test_prioritized_handlers_are_served_first_when_ready_together():
    import socket

    loop = reactor.Reactor("test-priority")
    order, pairs = [], [socket.socketpair() for _ in range(4)]
    handlers = [Recording(f"stranger{i}", pairs[i][0], order, False) for i in range(3)]
    handlers.append(Recording("peer", pairs[3][0], order, True))
    for h in handlers:
        loop.register(h)
    registered, hold, release = threading.Event(), threading.Event(), threading.Event()
    loop.call_soon(registered.set)
    assert registered.wait(10)
    loop.call_soon(lambda: (hold.set(), release.wait(10)))  # keep the loop busy while all become ready
    assert hold.wait(10)
    for _, theirs in pairs:
        theirs.send(b"x")
    release.set()
    done = threading.Event()
    loop.call_later(0.2, done.set)
    assert done.wait(10)
    assert order[0] == "peer" and sorted(order) == ["peer", "stranger0", "stranger1", "stranger2"]
    _finish(loop, handlers, pairs)


def test_a_burst_of_unprioritized_handlers_is_served_over_several_passes():
    import socket

    loop = reactor.Reactor("test-budget")
    order, pairs = [], [socket.socketpair() for _ in range(100)]
    handlers = [Recording(f"stranger{i}", ours, order, False) for i, (ours, _) in enumerate(pairs)]
    for h in handlers:
        loop.register(h)
    registered, hold, release = threading.Event(), threading.Event(), threading.Event()
    loop.call_soon(registered.set)
    assert registered.wait(10)
    loop.call_soon(lambda: (hold.set(), release.wait(10)))
    assert hold.wait(10)
    for _, theirs in pairs:
        theirs.send(b"x")
    served_in_first_pass = []
    loop.call_soon(lambda: served_in_first_pass.append(len(order)))  # runs after the next pass
    release.set()
    done = threading.Event()
    loop.call_later(0.5, done.set)
    assert done.wait(10)
    assert served_in_first_pass == [reactor.Reactor.OTHERS_PER_PASS]
    assert len(order) == 100
    _finish(loop, handlers, pairs)
