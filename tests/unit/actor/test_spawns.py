"""A host mesh's stop bookkeeping (:mod:`mesh_client._src.actor.spawns`).

Aspects: a stop is done once its own meshes and the spawns in flight when it came have ended;
a spawn that began after it, or ended before it, is not waited for; a spawn in flight at a stop
gets that stop back (its mesh is the stop's to stop); a failed spawn releases the stop; the first
failure is the stop's; no spawn begins after shutdown, nor a stop (Monarch's second shutdown()
raises); a shutdown after a stop is one. A stop finishes (its caller's future) only after the
stop taken before it, with that one's failure, and runs its last step after it; a refused stop
raises once the shutdown has finished; shutting down once hands later callers the shutdown's
future. A stop a Ctrl-C interrupts (in its own part or its last step) still finishes, so the
stops after it do. A stop or refusal on the thread that runs an earlier stop (a signal handler
that interrupted it) does not wait for that stop.
"""

from __future__ import annotations

import pytest

from mesh_client._src.actor import spawns
from mesh_client._src.runtime import futures

MESH = object()  # a mesh is only kept and handed back here


class Interrupted:
    """A mesh whose stop a Ctrl-C interrupted: ``ProcMesh.stop()``'s future keeps the
    KeyboardInterrupt, as every later ``stop()`` of it returns that future."""

    _stopped = False

    def stop(self, reason: str) -> futures.Future[None]:
        return futures.failed(KeyboardInterrupt())


def test_a_stop_waits_for_the_spawns_in_flight_when_it_came():
    ledger = spawns.Spawns()
    before, waiting = ledger.begin(), ledger.begin()
    assert before is not None and waiting is not None
    assert ledger.end(before, MESH) == []
    taken = ledger.take(shutdown=False)
    assert taken is not None
    meshes, stopping = taken
    assert meshes == [MESH]
    after = ledger.begin()
    assert after is not None
    ledger.settle(stopping, spawns.OWN, None)
    assert not stopping.done.done()
    assert ledger.end(after, MESH) == []
    assert not stopping.done.done()
    assert ledger.end(waiting, MESH) == [stopping]
    ledger.settle(stopping, waiting, None)
    assert stopping.done.get(timeout=0) is None
    kept = ledger.take(shutdown=False)
    assert kept is not None and kept[0] == [MESH]  # the one spawned after the stop is kept


def test_a_failed_spawn_releases_the_stop_and_the_first_failure_is_the_stop_s():
    ledger = spawns.Spawns()
    failing, late = ledger.begin(), ledger.begin()
    assert failing is not None and late is not None
    taken = ledger.take(shutdown=True)
    assert taken is not None
    stopping = taken[1]
    assert ledger.begin() is None  # shut down: no more spawns
    ledger.settle(stopping, spawns.OWN, None)
    assert ledger.end(failing, None) == []
    assert ledger.end(late, MESH) == [stopping]
    ledger.settle(stopping, late, RuntimeError("could not delete"))
    with pytest.raises(RuntimeError, match="could not delete"):
        stopping.done.get(timeout=0)


def test_after_a_shutdown_no_stop_is_taken_but_a_shutdown_after_a_stop_is():
    ledger = spawns.Spawns()
    assert ledger.take(shutdown=False) is not None
    assert not ledger.shut_down
    assert ledger.take(shutdown=True) is not None
    assert ledger.shut_down
    assert ledger.take(shutdown=True) is None and ledger.take(shutdown=False) is None


def test_a_stop_finishes_after_the_one_taken_before_it_with_that_one_s_failure():
    """The first stop took the meshes; the second has nothing of its own to stop. Its future
    completed at once, while the first was still stopping them, and never heard that the first
    failed; its last step (a worker host mesh ends its agents or workers) ran before the first
    was done with them."""
    ledger = spawns.Spawns()
    spawn = ledger.begin()
    assert spawn is not None and ledger.end(spawn, MESH) == []
    first = ledger.take(shutdown=False)
    assert first is not None and first[0] == [MESH]
    first_finished = ledger.finish(first[1])
    second = ledger.take(shutdown=True)
    assert second is not None and second[0] == []
    first_done_at_last_step: list[bool] = []

    def last_step():
        first_done_at_last_step.append(first_finished.done())
        return futures.completed(None)

    second_finished = ledger.finish(second[1], last_step)
    ledger.stop_own(second[1], second[0], "host mesh shut down")
    assert second[1].done.done()  # its own part: nothing
    assert not second_finished.done() and first_done_at_last_step == []
    ledger.settle(first[1], spawns.OWN, RuntimeError("could not delete mesh-a"))
    for finished in (first_finished, second_finished):
        with pytest.raises(RuntimeError, match="could not delete mesh-a"):
            finished.get(timeout=0)
    assert first_done_at_last_step == [True]


def test_a_refused_stop_raises_once_the_shutdown_has_finished_and_shutting_down_once_joins_it():
    ledger = spawns.Spawns()
    taken = ledger.shutdown_once()
    assert isinstance(taken, tuple)
    finished = ledger.finish(taken[1])
    assert ledger.shutdown_once() is finished  # a second async with's exit: the same shutdown
    assert ledger.take(shutdown=False) is None
    refused = ledger.refusal(RuntimeError("HostMesh has already been shut down"))
    assert not refused.done()
    ledger.stop_own(taken[1], taken[0], "host mesh shut down")
    assert finished.get(timeout=0) is None
    with pytest.raises(RuntimeError, match="already been shut down"):
        refused.get(timeout=0)


def test_a_stop_a_ctrl_c_interrupts_still_finishes_and_so_do_the_stops_after_it():
    """Ctrl-C during ``hosts.stop()`` (its own meshes' stop, or its last step): the caller gets
    the KeyboardInterrupt, and the stop still finishes, raising that it was cut short, as does
    a stop taken while it ran, which finishes after it (it waited for ever: the interrupted
    stop never settled); a stop taken later finishes as usual."""
    ledger = spawns.Spawns()
    spawn = ledger.begin()
    assert spawn is not None and ledger.end(spawn, Interrupted()) == []
    first = ledger.take(shutdown=False)
    second = ledger.take(shutdown=False)
    assert first is not None and second is not None and second[0] == []

    def interrupted_step() -> futures.Future[None]:
        raise KeyboardInterrupt

    first_finished = ledger.finish(first[1])
    second_finished = ledger.finish(second[1], interrupted_step)
    with pytest.raises(KeyboardInterrupt):
        ledger.stop_own(first[1], first[0], "host mesh stopped")
    with pytest.raises(KeyboardInterrupt):
        ledger.stop_own(second[1], second[0], "host mesh stopped")
    for finished in (first_finished, second_finished):
        with pytest.raises(RuntimeError, match=r"^a stop of this host mesh was interrupted \(KeyboardInterrupt\)"):
            finished.get(timeout=0)
    third = ledger.take(shutdown=True)
    assert third is not None
    third_finished = ledger.finish(third[1], lambda: futures.completed(None))
    ledger.stop_own(third[1], third[0], "host mesh shut down")
    assert third_finished.get(timeout=0) is None


def test_a_drained_spawn_s_stop_that_a_ctrl_c_interrupts_still_settles_the_stops_it_owed():
    """A spawn in flight at a stop, up, then its procs' stop interrupted by Ctrl-C (on the
    spawning thread): the stop that waited for it is done, raising that it was cut short (it
    waited for ever)."""
    ledger = spawns.Spawns()
    spawn = ledger.begin()
    assert spawn is not None
    taken = ledger.take(shutdown=False)
    assert taken is not None
    ledger.settle(taken[1], spawns.OWN, None)
    late = ledger.end(spawn, MESH)
    assert late == [taken[1]]
    with pytest.raises(KeyboardInterrupt):
        ledger.stop_late(spawn, late, Interrupted(), "host mesh stopped")
    with pytest.raises(RuntimeError, match="interrupted"):
        taken[1].done.get(timeout=0)


def test_a_stop_on_the_thread_that_runs_an_earlier_stop_does_not_wait_for_it():
    """A signal handler's ``hosts.shutdown().get()`` (then a ``hosts.stop().get()``, refused)
    on the main thread while it runs ``hosts.stop()``, here from inside a mesh's stop: the
    earlier stop goes on only once the handler returns, so neither may wait for it. They
    finished after it and waited for ever."""
    ledger = spawns.Spawns()
    inner: dict[str, futures.Future[None]] = {}
    done_in_handler: list[bool] = []

    class Reentering:
        _stopped = False

        def stop(self, reason: str) -> futures.Future[None]:
            second = ledger.take(shutdown=True)
            assert second is not None and second[0] == []
            inner["shutdown"] = ledger.finish(second[1], lambda: futures.completed(None))
            ledger.stop_own(second[1], second[0], "host mesh shut down")
            assert ledger.take(shutdown=False) is None
            inner["refused"] = ledger.refusal(RuntimeError("HostMesh has already been shut down"))
            done_in_handler.extend(inner[key].done() for key in ("shutdown", "refused"))
            return futures.completed(None)

    spawn = ledger.begin()
    assert spawn is not None and ledger.end(spawn, Reentering()) == []
    first = ledger.take(shutdown=False)
    assert first is not None
    first_finished = ledger.finish(first[1])
    ledger.stop_own(first[1], first[0], "host mesh stopped")
    assert done_in_handler == [True, True]  # a wait there would never end
    assert inner["shutdown"].get(timeout=0) is None
    with pytest.raises(RuntimeError, match="already been shut down"):
        inner["refused"].get(timeout=0)
    assert first_finished.get(timeout=0) is None
