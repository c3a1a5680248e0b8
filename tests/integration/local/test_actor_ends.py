"""How an actor ends, and what ends with it, as in Monarch.

Aspects: stopping an actor stops the meshes it made, newest first, after its own ``__cleanup__``
(which may still call them): an actor mesh on procs it was given, and procs of its own (their
process exits); an actor that fails takes its children too; ``context().actor_instance.stop()``
stops an actor after the messages queued before it, as a normal end (no supervision event), and
``abort()``/``kill()`` fail it, its owner's ``__supervise__`` seeing why; an async owner
handles a child's failure while its endpoint waits for it; the client is no actor to stop; a
concurrent call in flight when its actor stops is answered; a mesh an actor stopped itself is
not stopped again when the actor ends, nor kept.
"""

import time

import pytest

from mesh_client import SupervisionError, context, this_host
from tests.cluster import processes
from tests.integration.local.actors import (
    AwaitsItsChildren,
    Concurrent,
    Ends,
    Parent,
    SpawnsOnAll,
    Tally,
)

_alive = processes.alive  # a zombie, or a process gone meanwhile, is not


def _wait_gone(pid: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture(scope="module")
def procs():
    with this_host().spawn_procs(per_host={"gpus": 2}, name="ends") as mesh:
        yield mesh


@pytest.mark.parametrize("ending", ["stopped by its owner", "stopped itself", "aborted itself"])
def test_an_actor_takes_the_meshes_it_made_with_it(procs, faults, ending):
    tally = procs.slice(gpus=0).spawn("tally", Tally)
    parent = procs.slice(gpus=1).spawn("parent", Parent, procs.slice(gpus=0), tally)
    own_pid = parent.own_pid.call_one().get(timeout=60)
    assert _alive(own_pid)
    if ending == "stopped by its owner":
        parent.stop().get(timeout=120)
    else:
        how = "stop" if ending == "stopped itself" else "abort"
        assert parent.end.call_one(how, "done").get(timeout=60) == "asked"
    assert _wait_gone(own_pid), "the proc the actor made outlived it"
    # An actor that ended itself says nothing when it is done: the last cleanup is awaited.
    deadline = time.monotonic() + 60
    while len(notes := tally.notes.call_one().get(timeout=60)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    # Its own __cleanup__ first (its children still answer it), then the children, newest first.
    assert notes == [f"parent cleanup, child pid {own_pid}", "cleanup on own procs", "cleanup on given procs"], notes
    with pytest.raises(SupervisionError):
        parent.own_pid.call_one().get(timeout=60)
    if ending == "aborted itself":
        (failure,) = faults.wait("parent")
        assert "actor explicitly aborted due to: done" in failure.report()
    else:
        assert faults.named("parent") == []
    tally.stop().get(timeout=60)


def test_an_actor_that_stops_itself_handles_what_was_queued_first(procs, faults):
    actor = procs.slice(gpus=0).spawn("selfstop", Ends)
    before = [actor.echo.call_one(i) for i in range(3)]  # queued before the message that stops it
    assert actor.end.call_one("stop", "work done").get(timeout=60) == "asked"
    assert [f.get(timeout=60) for f in before] == [0, 1, 2]
    # Sent once its stop was queued (the reply to "end" came after): behind the stop.
    with pytest.raises(SupervisionError, match=r"has status: stopped \(work done\)"):
        actor.echo.call_one(3).get(timeout=60)
    assert faults.named("selfstop") == []


@pytest.mark.parametrize("how", ["abort", "kill"])
def test_an_actor_that_aborts_itself_fails_and_its_owner_hears_why(procs, faults, how):
    actor = procs.slice(gpus=0).spawn(f"self{how}", Ends)
    assert actor.end.call_one(how, "cannot go on").get(timeout=60) == "asked"
    (failure,) = faults.wait(f"self{how}")
    assert "actor explicitly aborted due to: cannot go on" in failure.report()
    with pytest.raises(SupervisionError, match="actor explicitly aborted due to: cannot go on"):
        actor.echo.call_one(1).get(timeout=60)


def test_an_async_owner_handles_a_failure_while_its_endpoint_waits_for_it(procs, faults):
    owner = procs.slice(gpus=1).spawn("waits", AwaitsItsChildren, procs.slice(gpus=0))
    assert owner.make_one_abort.call_one().get(timeout=120) == ["aborting"]
    assert faults.named("waits") == [] and faults.named("aborting") == []


def test_the_client_is_no_actor_to_stop():
    with pytest.raises(RuntimeError, match=r"actor_instance\.stop\(\) is for an actor: the client is not one"):
        context().actor_instance.stop()


def test_a_concurrent_call_in_flight_when_its_actor_stops_is_answered(procs, faults):
    """It is cancelled as the actor stops: its caller waited for ever (a review found it)."""
    actor = procs.slice(gpus=0).spawn("inflight", Concurrent)
    waiting = actor.wait_for_open.call_one()  # never opened
    actor.stop().get(timeout=60)
    with pytest.raises(SupervisionError, match=r"ended while the call ran, which was cancelled"):
        waiting.get(timeout=60)
    assert faults.named("inflight") == []


def test_meshes_an_actor_stopped_are_not_kept_nor_stopped_again(procs):
    maker = procs.slice(gpus=0).spawn("maker", SpawnsOnAll, procs, "/dev/null")
    assert maker.make_and_stop.call_one(3).get(timeout=120) == 1  # its "counted" mesh alone


def test_a_child_on_a_stopping_proc_mesh_cleans_up_once(tmp_path):
    """The proc's shutdown and its owner's stop both asked it: __cleanup__ ran twice, at once,
    on two threads (a review found it)."""
    path = tmp_path / "cleanups"
    mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="onceonly")
    parent = mesh.slice(gpus=0).spawn("owner", SpawnsOnAll, mesh, str(path))
    parent.ready.call_one().get(timeout=60)  # its child is on both procs
    mesh.stop().get(timeout=120)
    pids = path.read_text().split()
    assert len(pids) == 2 and len(set(pids)) == 2, pids
