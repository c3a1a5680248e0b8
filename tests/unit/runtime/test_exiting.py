"""runtime/exiting.py with real threads: end_all tells every registered thread to stop, waits
for them (bounded in all), reports those still running, and a stop that raises keeps no other
thread running; threads that ended are dropped from the registry. Each test has a registry of its
own: the process's (exiting.EXITS) holds this test process's supervision thread, among others."""

import threading

from mesh_client._src.runtime import exiting


def _stoppable():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    return thread, stop


def _running(exits):
    """A started thread registered with ``exits``, which its stop ends."""
    thread, stop = _stoppable()
    exits.track(thread, stop.set)
    thread.start()
    return thread, stop


def test_end_all_stops_and_waits_for_every_registered_thread():
    exits = exiting.Exits()
    threads = []
    for _ in range(3):
        thread, _ = _running(exits)
        threads.append(thread)
    assert exits.end_all(wait=30) == []
    assert not any(t.is_alive() for t in threads)
    assert exits.end_all(wait=30) == []  # nothing registered any more


def test_a_stop_that_raises_does_not_keep_the_others_running():
    exits = exiting.Exits()

    def broken_stop():
        raise RuntimeError("cannot stop")

    stuck = threading.Event()
    ignoring = threading.Thread(target=stuck.wait, daemon=True)
    exits.track(ignoring, broken_stop)
    ignoring.start()
    thread, _ = _running(exits)
    try:
        assert exits.end_all(wait=0.2) == [ignoring]  # reported, not waited for forever
        assert not thread.is_alive()
    finally:
        stuck.set()


def test_threads_that_ended_leave_the_registry():
    exits = exiting.Exits()
    ended = []
    for _ in range(64):
        thread, stop = _running(exits)
        stop.set()
        thread.join(30)
        ended.append(thread)
    later, _ = _running(exits)  # the registry is full: registering drops the ended ones
    assert not any(exits.tracks(t) for t in ended) and exits.tracks(later)
    assert exits.end_all(wait=30) == []


def test_a_thread_registered_while_others_end_is_ended_too():
    exits = exiting.Exits()
    late, late_stop = _stoppable()

    def stop_and_start_another():
        first_stop.set()
        exits.track(late, late_stop.set)
        late.start()

    first, first_stop = _stoppable()
    exits.track(first, stop_and_start_another)
    first.start()
    assert exits.end_all(wait=30) == []
    assert not first.is_alive() and not late.is_alive()


def test_exit_functions_moved_behind_the_threads_run_after_them():
    exits = exiting.Exits()
    order = []
    thread, stop = _stoppable()
    exits.track(thread, lambda: (stop.set(), order.append("halted")))
    thread.start()
    exits.after_threads(lambda: order.append(("after", thread.is_alive())))
    exits.run()
    assert order == ["halted", ("after", False)]
