"""The waits of the call path (runtime/waits.py and its native module _waits.c): bells, the
reactor's poll, paces and mailboxes, on real threads and descriptors. Both bells, the native one
and the lock one used without a C compiler, must behave alike."""

import math
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mesh_client._src.runtime import cores, reactor, waits
from mesh_client._src.runtime.futures import Future

native = waits.native


def test_the_native_module_is_built():
    # scripts/setup builds it (pyproject's ext-modules); without it nothing spins.
    assert native is not None, "mesh_client._src.runtime._waits is missing: run pip install -e . with a C compiler"
    assert waits.make_bell is native.Bell


BELLS = [pytest.param(lambda: native.Bell(), id="native"), pytest.param(waits._LockBell, id="lock")]
SPINS = [0, 2_000_000]  # sleeping at once, and spinning 2 ms first


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", SPINS)
def test_a_ring_before_the_wait_is_kept_and_rings_merge(make, spin):
    bell = make()
    assert bell.wait(0.0, spin) is False
    bell.ring()
    bell.ring()
    assert bell.wait(1.0, spin) is True
    assert bell.wait(0.02, spin) is False  # the two rings were one


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("timeout", [math.inf, 1e12])
def test_a_wait_takes_a_timeout_too_long_for_the_clock(make, timeout, monkeypatch):
    bell = make()
    bell.ring()
    assert bell.wait(timeout) is True
    monkeypatch.setattr(waits, "make_bell", make)
    monkeypatch.setattr(waits._own, "bell", None, raising=False)
    fut: Future[str] = Future(None)
    threading.Timer(0.01, fut.set_result, ("done",)).start()
    assert fut.get(timeout=timeout) == "done"


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", SPINS)
def test_a_wait_times_out_after_its_timeout(make, spin):
    bell = make()
    started = time.monotonic()
    assert bell.wait(0.05, spin) is False
    assert time.monotonic() - started >= 0.05


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", SPINS)
def test_a_ring_from_another_thread_wakes_the_waiter(make, spin):
    bell = make()
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(bell.wait(10.0, spin)))
    waiter.start()
    time.sleep(0.02)  # asleep by now (past its spin)
    bell.ring()
    waiter.join(10)
    assert woke == [True]


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", [0, 50_000])
def test_no_ring_is_lost_in_a_long_ping_pong(make, spin):
    # Two threads hand a counter back and forth 5,000 times, each waking the other: a lost
    # wake-up leaves one waiting for good, and its bounded wait fails the test.
    ping, pong = make(), make()
    box = {"n": 0}
    failures = []

    def player(mine, theirs, parity):
        while box["n"] < 5000:
            if box["n"] % 2 == parity:
                box["n"] += 1
                theirs.ring()
            elif not mine.wait(5.0, spin) and box["n"] % 2 != parity and box["n"] < 5000:
                failures.append(box["n"])
                return

    a = threading.Thread(target=player, args=(ping, pong, 0))
    b = threading.Thread(target=player, args=(pong, ping, 1))
    a.start(), b.start()
    a.join(60), b.join(60)
    assert failures == [] and box["n"] >= 5000


class _Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise _Interrupted


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", SPINS)
def test_a_signal_ends_a_wait_in_the_main_thread_as_it_ends_a_lock_acquire(make, spin):
    # A Ctrl-C in a controller waiting for a long call raises there and then, not once the call
    # ends: the native wait lets Python's handlers run when a signal interrupts its sleep.
    bell = make()
    before = signal.signal(signal.SIGUSR1, _raise_interrupted)
    timer = threading.Timer(0.1, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
    try:
        with pytest.raises(_Interrupted):  # armed inside: a main thread held up on a busy host still catches it
            timer.start()
            bell.wait(20.0, spin)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, before)


def test_a_signal_during_the_spin_is_handled_when_the_spin_ends_not_after_the_sleep():
    bell = native.Bell()
    before = signal.signal(signal.SIGUSR1, _raise_interrupted)
    timer = threading.Timer(0.02, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
    try:
        with pytest.raises(_Interrupted):  # armed inside: a main thread held up on a busy host still catches it
            timer.start()
            bell.wait(20.0, 300_000_000)  # spins 0.3 s: the signal comes during the spin
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, before)


@pytest.mark.parametrize("make", BELLS)
@pytest.mark.parametrize("spin", [0, 500_000_000])  # asleep when the signal comes, or spinning
def test_a_signal_handler_that_waits_on_a_future_leaves_the_outer_wait_its_result(make, spin, monkeypatch):
    # Both waits use the thread's one bell: the handler's wait may take the outer future's
    # ring, wherever the outer wait was (asleep, spinning, about to wait); it must look again.
    monkeypatch.setattr(waits, "make_bell", make)
    monkeypatch.setattr(waits._own, "bell", None, raising=False)  # a fresh bell of that kind, with no history
    monkeypatch.setattr(waits, "SPIN_NS", spin)
    outer, inner = Future(None), Future(None)
    bell = waits.own_bell()
    rescued = []

    def handler(signum, frame):
        threading.Timer(0.05, outer.set_result, ("outer",)).start()
        threading.Timer(0.15, inner.set_result, ("inner",)).start()
        assert inner.get(timeout=10) == "inner"

    def rescue():  # had the ring been lost, the outer wait would sleep for good
        rescued.append(True)
        bell.ring()

    before = signal.signal(signal.SIGUSR1, handler)
    threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1)).start()
    watchdog = threading.Timer(20, rescue)
    watchdog.start()
    try:
        assert outer.get() == "outer"
    finally:
        watchdog.cancel()
        signal.signal(signal.SIGUSR1, before)
    assert rescued == []


def test_a_blocking_done_callback_on_the_reactor_does_not_hold_back_the_rings_before_it():
    # The reactor defers its rings to its next poll; a done-callback (or a callback or timer)
    # that blocks on a thread it was about to wake would wait for good: they ring first.
    lock = threading.Lock()
    first, second = Future(None), Future(None)
    second.add_done_callback(lambda fut: (lock.acquire(), lock.release()))

    def complete():
        first.set_result("first")  # wakes the main thread, which holds the lock until then
        second.set_result("second")  # its callback needs the lock

    with lock:
        reactor.get_reactor().call_later(0.02, complete)
        assert first.get(timeout=10) == "first"
    assert second.get(timeout=10) == "second"


def test_a_nan_timeout_is_refused():
    with pytest.raises(ValueError, match="not NaN"):
        native.Bell().wait(float("nan"))


def test_a_bell_spins_only_while_its_recent_waits_were_short():
    pace = native.Pace()
    assert pace.average_ns() == 0
    epoll = select.epoll()
    try:
        native.poll(epoll.fileno(), 0.02, 1_000_000, [], pace)  # a 20 ms wait, counted as 4 ms
        assert pace.average_ns() == 1_000_000  # a quarter of the way from 0 to 4 ms
        for _ in range(20):
            native.poll(epoll.fileno(), 0.02, 1_000_000, [], pace)
        assert 3_900_000 < pace.average_ns() <= 4_000_000  # long waits, capped: spinning is off
        # Immediate polls (timeout 0: the reactor has callbacks queued) are no wait at all.
        native.poll(epoll.fileno(), 0.0, 1_000_000, [], pace)
        assert pace.average_ns() > 3_900_000
        # Without spinning nothing is recorded.
        native.poll(epoll.fileno(), 0.001, 0, [], pace)
        assert pace.average_ns() > 3_900_000
    finally:
        epoll.close()


def test_poll_rings_the_bells_then_returns_ready_descriptors():
    epoll = select.epoll()
    a, b = socket.socketpair()
    try:
        epoll.register(a.fileno(), select.EPOLLIN)
        bell = native.Bell()
        rings = [bell]
        assert native.poll(epoll.fileno(), 0.0, 0, rings) == []
        assert bell.wait(0.0) is True  # rung by the poll
        b.send(b"x")
        assert native.poll(epoll.fileno(), 5.0, 1_000_000) == [(a.fileno(), select.EPOLLIN)]
        started = time.monotonic()
        a.recv(1)
        assert native.poll(epoll.fileno(), 0.03, 1_000_000, None, native.Pace()) == []
        assert time.monotonic() - started >= 0.03
    finally:
        epoll.close(), a.close(), b.close()


def test_poll_refuses_what_is_not_a_bell_or_a_pace():
    epoll = select.epoll()
    try:
        with pytest.raises(TypeError, match="rings must hold Bell objects only"):
            native.poll(epoll.fileno(), 0.0, 0, [object()])
        with pytest.raises(TypeError, match="pace must be a Pace or None"):
            native.poll(epoll.fileno(), 0.0, 0, [], native.Bell())
        with pytest.raises(OSError):
            native.poll(-1, 0.0, 0)
    finally:
        epoll.close()


def test_the_reactor_thread_defers_its_rings_until_poll():
    got = []

    def on_a_thread():
        rings = waits.deferred()
        bell = native.Bell()
        waits.ring(bell)
        got.append((rings == [bell], bell.wait(0.0)))
        waits._deferred.rings = None

    thread = threading.Thread(target=on_a_thread)
    thread.start()
    thread.join(10)
    assert got == [(True, False)]  # queued for the poll, not rung
    bell = native.Bell()
    waits.ring(bell)  # any other thread rings at once
    assert bell.wait(0.0) is True


DEFERRED_WHILE_THE_POLL_RETURNS = textwrap.dedent(
    """
    import gc, socket, threading
    from mesh_client._src.runtime import reactor, waits

    rings = waits.deferred()  # this thread stands for the reactor's
    poller = reactor._Poller()
    pairs = [socket.socketpair() for _ in range(32)]
    for a, b in pairs:
        poller.register(a.fileno())
        b.send(b"x")  # ready: the poll's result has a tuple per descriptor to allocate
    first, late = waits.native.Bell(), waits.native.Bell()
    rings.append(first)
    rang = []

    def collecting(phase, info):
        if phase == "start" and first.wait(0.0):  # the poll has rung what was deferred
            waits.ring(late)
            rang.append(True)

    gc.callbacks.append(collecting)
    taken = [(i, -i) for i in range(5000)]  # no free pairs left: the poll's are new objects
    gc.set_threshold(1)  # and each new one may start a collection
    poller.poll(0.0, rings)
    gc.set_threshold(700)
    poller.poll(0.0, rings)
    print(rang, late.wait(0.0))
    """
)


def test_a_ring_deferred_while_the_poll_returns_is_rung_by_the_next_poll():
    # The poll takes the GIL back to build its result; a collection there runs finalizers on
    # the reactor's thread, and one that completes a future defers its ring to the same list.
    # In a process of its own: another thread's collection would change when this one's runs.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", DEFERRED_WHILE_THE_POLL_RETURNS], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[True]", "True"]  # the ring came, and the next poll rang it


def test_a_mailbox_hands_items_over_in_order_across_threads():
    box: waits.Mailbox[int] = waits.Mailbox()
    assert box.empty()
    got = []
    reader = threading.Thread(target=lambda: got.extend(box.get() for _ in range(3000)))
    reader.start()
    for i in range(3000):
        box.put(i)
        if i % 500 == 0:
            time.sleep(0.005)  # let the reader go back to sleep now and then
    reader.join(30)
    assert got == list(range(3000)) and box.empty()


@pytest.mark.parametrize(
    ("environ", "cpus", "expected"),
    [
        ({}, 16, (waits.DEFAULT_SPIN_US * 1000, waits.DEFAULT_SPIN_US * 1000)),
        ({}, waits.SPIN_MIN_CPUS, (waits.DEFAULT_SPIN_US * 1000, waits.DEFAULT_SPIN_US * 1000)),
        # A small host: the I/O thread's poll alone spins; a single core spins nowhere.
        ({}, waits.SPIN_MIN_CPUS - 1, (0, waits.SMALL_HOST_POLL_SPIN_US * 1000)),
        ({}, 2, (0, waits.SMALL_HOST_POLL_SPIN_US * 1000)),
        ({}, 1, (0, 0)),
        ({"PROCMESH_SPIN_US": "0"}, 64, (0, 0)),
        ({"PROCMESH_SPIN_US": "0"}, 2, (0, 0)),
        ({"PROCMESH_SPIN_US": "250"}, 2, (250_000, 250_000)),
        ({"PROCMESH_SPIN_US": " 2.5 "}, 1, (2_500, 2_500)),
        # The poll's alone, over the defaults or over PROCMESH_SPIN_US
        ({"PROCMESH_POLL_SPIN_US": "0"}, 2, (0, 0)),
        ({"PROCMESH_POLL_SPIN_US": "300"}, 16, (waits.DEFAULT_SPIN_US * 1000, 300_000)),
        ({"PROCMESH_SPIN_US": "50", "PROCMESH_POLL_SPIN_US": "200"}, 2, (50_000, 200_000)),
    ],
)
def test_how_long_a_process_spins(environ, cpus, expected):
    assert waits.spins_from(environ, cpus) == waits.Spins(*expected)


@pytest.mark.parametrize("name", ["PROCMESH_SPIN_US", "PROCMESH_POLL_SPIN_US"])
@pytest.mark.parametrize(("raw", "message"), [("fast", "is not a number"), ("-1", "is out of range"),
                                              ("nan", "is out of range"), ("2e6", "is out of range")])
def test_a_bad_spin_setting_says_what_to_give(name, raw, message):
    with pytest.raises(ValueError, match=f"{name}={raw!r} {message}"):
        waits.spins_from({name: raw}, 16)


def test_the_reactor_polls_with_the_poll_spin(monkeypatch):
    """The I/O thread's poll is handed POLL_SPIN_NS, the waits' spin nowhere (on a small host
    the two differ: 100 us and 0)."""
    from mesh_client._src.runtime import reactor

    handed = []

    def recording(epfd, timeout, spin_ns, rings, pace):
        handed.append(spin_ns)
        return native.poll(epfd, 0.0, 0, rings, pace)

    monkeypatch.setattr(waits, "SPIN_NS", 111_000)
    monkeypatch.setattr(waits, "POLL_SPIN_NS", 222_000)
    monkeypatch.setattr(reactor, "_native_poll", recording)
    poller = reactor._Poller()
    assert poller.poll(0.0, []) == []
    assert handed == [222_000]


def test_this_process_spins_as_its_environment_says():
    expected = waits.spins_from(os.environ, cores.usable_cores())
    assert (waits.SPIN_NS, waits.POLL_SPIN_NS) == expected


V1 = "4:memory:/pod/c1\n2:cpuacct:/pod/c1\n1:cpu:/pod/c1\n0::/\n"
V1_JOINED = "3:cpu,cpuacct:/kubepods/pod9/c2\n0::/\n"
V2 = "0::/kubepods.slice/pod7/c3\n"


@pytest.mark.parametrize(
    ("proc_cgroup", "files", "expected"),
    [
        # cgroup v2: the process's own cgroup, then the namespace's root
        (V2, {"/sys/fs/cgroup/kubepods.slice/pod7/c3/cpu.max": "200000 100000\n"}, 2.0),
        (V2, {"/sys/fs/cgroup/kubepods.slice/pod7/c3/cpu.max": "max 100000\n"}, None),
        ("0::/\n", {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}, 1.5),
        # cgroup v1, cpu alone or joined with cpuacct; -1 is no quota
        (V1, {"/sys/fs/cgroup/cpu/pod/c1/cpu.cfs_quota_us": "50000\n", "/sys/fs/cgroup/cpu/pod/c1/cpu.cfs_period_us": "100000\n"}, 0.5),
        (V1, {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, None),
        (V1_JOINED, {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "400000", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000"}, 4.0),
        # nothing readable, or nonsense: no limit known
        (V2, {}, None),
        ("", {"/sys/fs/cgroup/cpu.max": "lots 100000"}, None),
    ],
)
def test_a_cgroup_cpu_quota_is_read_as_a_container_runtime_sets_it(proc_cgroup, files, expected):
    assert cores.cgroup_cpu_quota(proc_cgroup, files.get) == expected


@pytest.mark.parametrize("name", ["Bell", "Pace"])
def test_the_native_types_take_no_arguments(name):
    with pytest.raises(TypeError, match=rf"^{name}\(\) takes no arguments$"):
        getattr(native, name)(1)
    with pytest.raises(TypeError, match=rf"^{name}\(\) takes no arguments$"):
        getattr(native, name)(spin=1)


@pytest.mark.parametrize("make", BELLS)
def test_waits_given_up_leave_no_bell_on_the_future(make, monkeypatch):
    # Threads that poll a pending future with timeouts, then end, must not pile their bells
    # on it; a thread still waiting keeps its own and is woken when it completes.
    monkeypatch.setattr(waits, "make_bell", make)
    fut: Future[str] = Future(None)

    def poll_once():
        with pytest.raises(TimeoutError):
            fut.get(timeout=0.001)

    for _ in range(20):
        t = threading.Thread(target=poll_once)
        t.start()
        t.join()
    assert fut._waiters == []
    got = []
    waiter = threading.Thread(target=lambda: got.append(fut.get(timeout=30)))
    waiter.start()
    while not fut._waiters and waiter.is_alive():
        time.sleep(0.001)
    fut.set_result("done")
    waiter.join()
    assert got == ["done"]

