"""Waking ahead of a reply that is due (runtime/ahead.py): what a thread expects from its recent
waits, a future's wait that wakes its I/O thread before the reply, and the reactor's poll that
spins while a message is due. Real threads, bells and descriptors; expectations are set by
waits that really took that long."""

import socket
import threading
import time

import pytest

from mesh_client._src.runtime import ahead, reactor, waits
from mesh_client._src.runtime.futures import Future

native = waits.native
needs_native = pytest.mark.skipif(native is None, reason="the native waits are not built (test_waits says so)")

AHEAD_NS = 300_000
MS = 1_000_000


def in_fresh_thread(fn):
    """Run ``fn`` on a new thread (its own recent waits) and return what it returned or raise what it raised."""
    out: dict[str, object] = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]


def waited_ago(ns, key=None):
    """Record a wait for a reply (of ``key``) that began ``ns`` ago."""
    ahead.waited(time.monotonic_ns() - ns, key)


@pytest.fixture
def waking_ahead(monkeypatch):
    monkeypatch.setattr(waits, "WAKE_AHEAD_NS", AHEAD_NS)
    # What a test records on this (the runner's) thread goes with it: else the later tests of
    # the run that wait on it would expect that.
    monkeypatch.setattr(ahead._recent, "waits", [])
    monkeypatch.setattr(ahead._recent, "keyed", {})


@pytest.mark.parametrize(
    ("environ", "poll_ns", "expected"),
    [
        ({}, waits.SMALL_HOST_POLL_SPIN_US * 1000, waits.DEFAULT_WAKE_AHEAD_US * 1000),  # a host that spins
        ({}, 0, 0),  # one core, or spinning turned off: no wake-ahead either
        ({"PROCMESH_WAKE_AHEAD_US": "0"}, 500_000, 0),
        ({"PROCMESH_WAKE_AHEAD_US": " 120 "}, 0, 120_000),
    ],
)
def test_how_far_ahead_a_process_wakes(environ, poll_ns, expected):
    assert waits.wake_ahead_from(environ, waits.Spins(0, poll_ns)) == expected


@pytest.mark.parametrize(("raw", "message"), [("soon", "is not a number: give the microseconds ahead"),
                                              ("-5", "is out of range: give 0 to")])
def test_a_bad_wake_ahead_setting_says_what_to_give(raw, message):
    with pytest.raises(ValueError, match=f"PROCMESH_WAKE_AHEAD_US={raw!r} {message}"):
        waits.wake_ahead_from({"PROCMESH_WAKE_AHEAD_US": raw}, waits.Spins(0, 0))


def test_a_thread_expects_the_shortest_of_its_recent_long_waits(waking_ahead):
    def expectations():
        seen = [ahead.due(0)]  # nothing waited yet
        waited_ago(20 * MS)
        seen.append(ahead.due(0))
        waited_ago(8 * MS)
        seen.append(ahead.due(0))
        for _ in range(ahead.RECENT_WAITS):  # the 8 ms one ages out
            waited_ago(30 * MS)
        seen.append(ahead.due(0))
        waited_ago(1 * MS)  # short (under LONG_WAITS wake-aheads): waking ahead stops
        seen.append(ahead.due(0))
        return seen

    nothing, after_20, after_8, after_30s, after_short = in_fresh_thread(expectations)
    assert nothing == 0 and after_short == 0
    # Each expectation is the wait's length (at least what was faked) less the wake-ahead.
    assert 20 * MS - AHEAD_NS <= after_20 < 20 * MS - AHEAD_NS + 1_000 * MS
    assert 8 * MS - AHEAD_NS <= after_8 < 8 * MS - AHEAD_NS + 1_000 * MS
    assert 30 * MS - AHEAD_NS <= after_30s < 30 * MS - AHEAD_NS + 1_000 * MS


def test_expectations_are_per_thread(waking_ahead):
    waited_ago(20 * MS)
    assert ahead.due(0) > 0
    assert in_fresh_thread(lambda: ahead.due(0)) == 0


def test_each_key_expects_its_own_recent_waits(waking_ahead):
    """A loop taking turns (a 20 ms endpoint, then a 50 ms one, then quick calls to a third)
    expects each endpoint's own; a short wait clears its key alone, and waits without a key
    keep the thread's own expectation."""

    def expectations():
        for _ in range(3):
            waited_ago(20 * MS, "generate")
            waited_ago(50 * MS, "train")
            waited_ago(1 * MS, "add")
        seen = {key: ahead.due(0, key) for key in ("generate", "train", "add")}
        seen["unkeyed"] = ahead.due(0)
        waited_ago(1 * MS, "generate")  # the generate endpoint got quick: it alone wakes no more
        seen["generate_after_short"] = ahead.due(0, "generate")
        seen["train_after_short"] = ahead.due(0, "train")
        return seen

    seen = in_fresh_thread(expectations)
    assert 20 * MS - AHEAD_NS <= seen["generate"] < 50 * MS - AHEAD_NS
    assert 50 * MS - AHEAD_NS <= seen["train"] < 50 * MS - AHEAD_NS + 1_000 * MS
    assert seen["add"] == seen["unkeyed"] == seen["generate_after_short"] == 0
    assert seen["train_after_short"] == seen["train"]


def test_a_thread_keeps_the_recent_waits_of_its_last_keys(waking_ahead):
    def kept():
        for k in range(ahead.KEYS_KEPT):
            waited_ago(20 * MS, k)
        waited_ago(20 * MS, 0)  # waited for again: the most recent
        waited_ago(20 * MS, "one more")  # the least recent (1) goes
        return {k: ahead.due(0, k) > 0 for k in [*range(ahead.KEYS_KEPT), "one more"]}, len(ahead._recent.keyed)

    kept_now, count = in_fresh_thread(kept)
    assert count == ahead.KEYS_KEPT
    assert [k for k, known in kept_now.items() if not known] == [1]


@needs_native
def test_a_keyed_reply_before_its_own_expected_time_wakes_nothing_ahead(waking_ahead):
    """The thread's other endpoint takes 20 ms; this one 5 s: its reply at 50 ms is not late."""

    def wait():
        waited_ago(5_000 * MS, "train")
        waited_ago(20 * MS, "generate")
        before = ahead.woken
        fut: Future[int] = Future(None, "train")
        threading.Timer(0.05, fut.set_result, (3,)).start()
        return fut.get(), ahead.woken - before

    assert in_fresh_thread(wait) == (3, 0)


@needs_native
def test_a_keyed_reply_after_its_own_expected_time_is_woken_ahead_for(waking_ahead, completed_after_waking):
    def wait():
        waited_ago(20 * MS, "generate")
        waited_ago(1 * MS)  # the thread's own last wait was short: unkeyed ones would not wake
        before = ahead.woken
        fut = completed_after_waking(7)
        fut._key = "generate"
        return fut.get(), ahead.woken - before

    assert in_fresh_thread(wait) == (7, 1)


@needs_native
@pytest.mark.parametrize(("expected_ms", "woken"), [(20, 1), (5_000, 0)])
def test_a_wait_for_an_async_endpoint_wakes_ahead_of_its_expected_end_alone(waking_ahead, monkeypatch, expected_ms,
                                                                            woken):
    """An actor's thread waiting for its endpoint on its loop wakes ahead where the endpoint's
    last runs say its end is due (not before), without waking its I/O thread: no message comes."""
    io_woken = []
    monkeypatch.setattr(reactor.Reactor, "wake_ahead", lambda self, until: io_woken.append(until))

    def wait():
        waited_ago(expected_ms * MS, "step")
        waited_ago(1 * MS)  # the thread's own last wait was short: only the key's counts
        bell = native.Bell()
        ended = threading.Event()

        def end():
            ended.set()
            bell.ring()

        threading.Timer(0.5, end).start()
        before = ahead.woken
        ahead.wait_on(bell, ended.is_set, "step")
        return ahead.woken - before, ahead.due(0, "step")

    got, expected = in_fresh_thread(wait)
    assert got == woken and io_woken == []
    assert 0 < expected < 5_000 * MS - AHEAD_NS  # this wait (about 0.5 s, however late it began) is recorded too


def test_nothing_wakes_ahead_where_it_is_off(monkeypatch):
    monkeypatch.setattr(waits, "WAKE_AHEAD_NS", 0)

    def expectation():
        waited_ago(50 * MS)
        return ahead.due(0)

    assert in_fresh_thread(expectation) == 0
    assert ahead.after_long_work(10.0) == 0


def completed_later(seconds, value):
    fut: Future[int] = Future(None)
    threading.Timer(seconds, fut.set_result, (value,)).start()
    return fut


@pytest.fixture
def completed_after_waking(monkeypatch):
    """``completed_after_waking(value)``: a future completed 50 ms after this process first wakes
    its I/O thread ahead (after 30 s at the latest), so its reply comes later than expected
    however late the waiting thread runs."""
    woke = threading.Event()
    wake_ahead = reactor.Reactor.wake_ahead

    def waking(self, spin_until_ns):
        wake_ahead(self, spin_until_ns)
        woke.set()

    monkeypatch.setattr(reactor.Reactor, "wake_ahead", waking)

    def completed(value):
        fut: Future[int] = Future(None)

        def complete():
            woke.wait(30)
            time.sleep(0.05)  # past the spin: the reply finds the threads asleep again
            fut.set_result(value)

        threading.Thread(target=complete, daemon=True).start()
        return fut

    return completed


@needs_native
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_reply_due_after_the_expected_time_is_woken_ahead_for(waking_ahead, completed_after_waking, timeout):
    """The thread expects 20 ms (it waited that long before); the reply comes after that: it
    wakes ahead once, has the I/O thread spin, and still gets its result."""

    def wait():
        waited_ago(20 * MS)
        before = ahead.woken
        value = completed_after_waking(7).get(timeout=timeout)
        return value, ahead.woken - before, ahead.due(0)

    value, woken, expected = in_fresh_thread(wait)
    assert value == 7
    assert woken == 1
    assert expected >= 20 * MS - AHEAD_NS  # the shortest recent wait stays the expectation


@needs_native
def test_a_reply_before_the_expected_time_wakes_nothing_ahead(waking_ahead):
    def wait():
        waited_ago(5_000 * MS)
        before = ahead.woken
        value = completed_later(0.05, 3).get()
        return value, ahead.woken - before, ahead.due(0)

    value, woken, expected = in_fresh_thread(wait)
    assert (value, woken) == (3, 0)
    # The shorter wait is expected next: about 50 ms, less by however late the wait began
    # after the timer that completes it (under a busy machine, more than the wake-ahead).
    assert 0 < expected < 5_000 * MS - AHEAD_NS


@needs_native
def test_a_timeout_before_the_expected_time_raises_without_waking_ahead(waking_ahead):
    def wait():
        waited_ago(5_000 * MS)
        before = ahead.woken
        fut = completed_later(1.0, 0)
        with pytest.raises(TimeoutError, match="no result within 0.05 s"):
            fut.get(timeout=0.05)
        return ahead.woken - before, fut.get(timeout=30)

    assert in_fresh_thread(wait) == (0, 0)


@needs_native
def test_a_timeout_after_waking_ahead_still_raises(waking_ahead):
    def wait():
        waited_ago(20 * MS)
        before = ahead.woken
        fut = completed_later(2.0, 0)
        with pytest.raises(TimeoutError, match="no result within 0.2 s"):
            fut.get(timeout=0.2)
        return ahead.woken - before

    assert in_fresh_thread(wait) == 1


@needs_native
def test_an_await_due_after_the_expected_time_has_the_io_thread_woken_ahead(waking_ahead, completed_after_waking):
    import asyncio

    async def awaited(fut):
        return await fut

    def wait():
        waited_ago(20 * MS)
        before = ahead.woken
        got = asyncio.run(awaited(completed_after_waking(5)))
        return got, ahead.woken - before

    assert in_fresh_thread(wait) == (5, 1)


@needs_native
def test_an_await_whose_reply_comes_before_the_expected_time_cancels_its_wake_timer(waking_ahead, monkeypatch):
    """The thread expects 10 minutes: its timer is due long after the reply, and is cancelled."""
    import asyncio

    timers = []
    wake_io_at = ahead.wake_io_at

    def recording(when_ns):
        timers.append(wake_io_at(when_ns))
        return timers[-1]

    monkeypatch.setattr(ahead, "wake_io_at", recording)

    async def awaited(fut):
        return await fut

    def wait():
        waited_ago(600_000 * MS)
        before = ahead.woken
        got = asyncio.run(awaited(completed_later(0.05, 6)))
        return got, ahead.woken - before

    assert in_fresh_thread(wait) == (6, 0)
    assert len(timers) == 1 and timers[0].cancelled


@pytest.mark.parametrize("make", [pytest.param(lambda: native.Bell(), id="native", marks=needs_native),
                                  pytest.param(waits._LockBell, id="lock")])
def test_an_unpaced_wait_times_out_and_takes_a_ring(make):
    bell = make()
    assert bell.wait(0.002, 1_000_000, False) is False
    threading.Timer(0.05, bell.ring).start()
    assert bell.wait(30.0, 1_000_000, False) is True


def test_a_mailbox_read_that_spins_first_gets_what_comes_later():
    box: waits.Mailbox[str] = waits.Mailbox()
    threading.Timer(0.05, box.put, ("late",)).start()
    assert box.get(2 * AHEAD_NS) == "late"
    box.put("next")
    assert box.get(2 * AHEAD_NS) == "next"


@needs_native
def test_the_poll_spins_unpaced_until_a_message_is_due(monkeypatch):
    handed = []

    def recording(epfd, timeout, spin_ns, rings, pace):
        handed.append((spin_ns, pace))
        return native.poll(epfd, 0.0, 0, rings, pace)

    monkeypatch.setattr(waits, "POLL_SPIN_NS", 222_000)
    monkeypatch.setattr(reactor, "_native_poll", recording)
    poller = reactor._Poller()
    poller.poll(0.0, [], time.monotonic_ns() + 10_000 * MS)
    poller.poll(0.0, [], time.monotonic_ns() - MS)  # due already past: the usual spin
    poller.poll(0.0, [])
    (due_spin, due_pace), past, usual = handed
    assert 9_000 * MS < due_spin <= 10_000 * MS and due_pace is None
    assert past == usual == (222_000, poller._pace)


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.read = threading.Event()
        self.spin_until_seen = -1

    def fileno(self):
        return self.sock.fileno()

    def on_readable(self):
        self.sock.recv(16)
        self.read.set()


@needs_native
def test_the_loop_spins_until_what_was_due_is_read():
    loop = reactor.Reactor("test-ahead")
    a, b = socket.socketpair()
    try:
        reader = _Reader(a)
        loop.register(reader)
        due = time.monotonic_ns() + 200 * MS
        polled_due = threading.Event()
        poll = loop._poller.poll

        def watched(timeout, rings, spin_until_ns=0):
            if spin_until_ns == due:
                polled_due.set()
            return poll(timeout, rings, spin_until_ns)

        loop._poller.poll = watched
        loop.wake_ahead(due)
        loop.wake_ahead(due - 100 * MS)  # an earlier one does not shorten it
        assert loop._spin_until_ns == due
        # Sent once the loop polls for it: a message that comes in the poll the wake-ahead cut
        # short may be another's (the due one still to come), so that poll leaves the spin set.
        assert polled_due.wait(30)
        b.send(b"x")
        assert reader.read.wait(30)
        assert loop._spin_until_ns == 0  # read: the loop sleeps again when idle
    finally:
        loop.unregister(reader)
        a.close()
        b.close()


def ctrl_c(*args):
    raise KeyboardInterrupt


@needs_native
def test_a_ctrl_c_as_a_wait_works_out_when_to_wake_leaves_no_bell_on_the_future(waking_ahead):
    """The Ctrl-C lands as the wait reads its expectation (after its bell joined the future's):
    the bell goes with the wait, as for a Ctrl-C while it sleeps."""

    def wait():
        waited_ago(20 * MS)
        fut: Future[int] = Future(None)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(ahead, "due", ctrl_c)
            with pytest.raises(KeyboardInterrupt):
                fut.get(timeout=30)
        return fut._waiters

    assert not in_fresh_thread(wait)


@needs_native
def test_a_ctrl_c_as_an_await_sets_its_wake_timer_leaves_no_callback_on_the_future(waking_ahead):
    import asyncio

    async def awaited(fut):
        return await fut

    def wait():
        waited_ago(20 * MS)
        fut: Future[int] = Future(None)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(ahead, "wake_io_at", ctrl_c)
            with pytest.raises(KeyboardInterrupt):
                asyncio.run(awaited(fut))
        return fut._callbacks

    assert not in_fresh_thread(wait)


class _Recording:
    """A bell that records each wait's (spin_ns, paced) and runs ``on_wait(n)`` before the n-th."""

    def __init__(self, bell, on_wait):
        self.bell = bell
        self.on_wait = on_wait
        self.waits = []

    def ring(self):
        self.bell.ring()

    def wait(self, timeout=None, spin_ns=0, paced=True):
        self.waits.append((spin_ns, paced))
        self.on_wait(len(self.waits))
        return self.bell.wait(timeout, spin_ns, paced)


def test_a_mailbox_read_that_spins_first_spins_on_past_a_ring_left_from_an_item_taken_without_waiting():
    """An item taken without waiting leaves its ring, which ends the next read's first wait at
    once: the read spins on for what is left of its spin, not as its recent waits say."""
    box: waits.Mailbox[str] = waits.Mailbox()
    box.put("queued")
    assert box.get() == "queued"  # its ring is left on the bell

    def on_wait(n):
        if n == 2:
            box.put("due")

    box._bell = _Recording(box._bell, on_wait)
    window = 10_000 * MS
    assert box.get(window) == "due"
    (first, first_paced), (second, second_paced) = box._bell.waits
    assert first_paced is second_paced is False
    assert window // 2 < second < first <= window


@needs_native
def test_a_wait_that_woke_ahead_spins_what_is_left_of_its_window_past_an_earlier_futures_ring(waking_ahead):
    """A ring from an earlier future ends the spin after waking ahead early: the wait spins on
    for the rest of that spin, not a whole one again (at most twice the wake-ahead in all)."""

    def wait():
        waited_ago(20 * MS)
        fut: Future[int] = Future(None)

        def on_wait(n):
            if n == 2:  # the spin after waking ahead: an earlier future's ring ends it at once
                bell.bell.ring()
            elif n == 3:
                fut.set_result(4)

        bell = waits._own.bell = _Recording(native.Bell(), on_wait)
        return fut.get(), bell.waits

    value, (timed, woke, rest) = in_fresh_thread(wait)
    assert value == 4
    assert timed[1] is True  # the sleep until the reply is due
    assert woke[1] is rest[1] is False
    assert rest[0] <= woke[0] <= 2 * AHEAD_NS and rest[0] < 2 * AHEAD_NS
