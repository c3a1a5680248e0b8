"""After a local proc is killed (SIGKILL of its proc server): the way on.

Aspects: the failed call says the local backend restarts no proc by itself and names
``respawn``/``reconnect``; ``reconnect()`` starts a new process in the dead one's place (its
bootstrap runs again), after which old handles on it fail at once naming the restart, survivors
keep their actors and state, and actors spawned anew answer; ``respawn()`` also spawns every actor
mesh again with the same class and arguments, so the old handles answer again (fresh state on the
restarted proc only); a stopped actor mesh is not respawned; a mesh reference received from
elsewhere refuses to reconnect, saying who can; a connection that breaks under a live proc is
reached again where it is, at once and without a fault (runtime/relinking.py; same process,
actors and state kept, no bootstrap), ``reconnect()`` then has nothing to do, and its actors
are watched again (a later death is reported); a reconnect whose
bootstrap raised leaves the proc to bootstrap: the next one runs it again; ``respawn()`` spawns
again only the actor meshes whose handles (or slices of them) the program still holds; two
threads respawning at once take turns, so one new process replaces the dead one.
"""

import gc
import os
import pickle
import signal
import socket
import threading

import pytest

from mesh_client import Actor, ConnectionBroken, SupervisionError, endpoint, this_host
from mesh_client._src.actor import supervision
from tests.integration.local.actors import Recorder


def set_marker():
    os.environ["TEST_BOOTSTRAPPED"] = str(os.getpid())


def kill(mesh_actor, **coords):
    pid = mesh_actor.slice(**coords).where.call_one().get()["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def test_reconnect_starts_the_dead_proc_again_and_old_handles_name_the_restart(faults):
    with this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=set_marker, name="victim") as mesh:
        rec = mesh.spawn("rec", Recorder)
        assert rec.slice(gpus=0).record.call_one("kept").get() == 1
        dead = kill(rec, gpus=1)
        with pytest.raises(SupervisionError) as lost:
            rec.echo.call(1).get(timeout=60)
        assert "the local backend restarts no proc by itself" in str(lost.value)
        assert "mesh.respawn()" in str(lost.value) and "mesh.reconnect()" in str(lost.value)
        assert faults.wait("rec")[0].crashed_ranks == [1]

        assert mesh.reconnect() == [1]
        with pytest.raises(SupervisionError, match=r"proc victim\[gpus=1\] was restarted \(restart 1 of this proc"
                                                   r".*after actor mesh 'rec' was spawned on it.*re-spawn your actors"):
            rec.slice(gpus=1).echo.call_one(2).get(timeout=60)
        with pytest.raises(SupervisionError, match="was restarted"):
            rec.echo.call(2).get(timeout=60)  # the whole mesh's call fails on the restarted one
        assert rec.slice(gpus=0).record.call_one("still").get() == 2  # the survivor kept its state

        fresh = mesh.spawn("fresh", Recorder).where.call().get()
        new_pid = fresh.item(gpus=1)["pid"]
        assert new_pid != dead
        assert fresh.item(gpus=1)["env"]["TEST_BOOTSTRAPPED"] == str(new_pid)  # bootstrap ran again
        assert mesh.reconnect() == []  # nothing more to bring back
        elsewhere = pickle.loads(pickle.dumps(mesh))  # as an actor in another proc would get it
        with pytest.raises(RuntimeError, match="a reference received from another process"):
            elsewhere.reconnect()


def test_respawn_brings_the_old_handles_back(faults):
    with this_host().spawn_procs(per_host={"gpus": 2}, name="again") as mesh:
        rec = mesh.spawn("rec", Recorder, "tagged")
        stopped = mesh.spawn("gone", Recorder)
        stopped.stop().get()
        for value in ("a", "b"):
            rec.record.call(value).get()
        kill(rec, gpus=0)
        with pytest.raises(SupervisionError):
            rec.slice(gpus=0).echo.call_one(1).get(timeout=60)

        assert mesh.respawn() == [0]
        where = rec.where.call().get()
        assert {v["tag"] for v in where.values()} == {"tagged"}  # the first spawn's arguments
        assert list(rec.record.call("c").get().values()) == [1, 3]  # fresh on 0, kept on 1
        with pytest.raises(SupervisionError, match="was restarted"):  # stopped before: not respawned
            stopped.slice(gpus=0).echo.call_one(0).get(timeout=60)


def test_a_death_reported_after_the_owner_restarted_the_proc_is_not_reported(faults):
    """The supervision thread is held while a proc dies and the program reconnects it: its
    old process's end, reported late, would reach the program after it moved on (and the
    default hook ends the controller); a death of the new process is reported."""
    held, done = threading.Event(), threading.Event()
    with this_host().spawn_procs(per_host={"gpus": 2}, name="late") as mesh:
        rec = mesh.spawn("rec", Recorder)
        supervision.submit(held.wait)  # the watch's end queues behind this
        try:
            kill(rec, gpus=1)
            with pytest.raises(SupervisionError):
                rec.slice(gpus=1).echo.call_one(1).get(timeout=60)
            assert mesh.reconnect() == [1]
        finally:
            held.set()
        supervision.submit(done.set)  # after every end queued before it
        assert done.wait(60)
        assert faults.named("rec") == []
        again = mesh.spawn("again", Recorder)
        kill(again, gpus=1)
        assert [f.crashed_ranks for f in faults.wait("again")] == [[1]]


def cut(mesh, index):
    """Break the client's connection (TCP or unix) to proc ``index`` underneath it (the proc lives on)."""
    peer = mesh._group.peers[index]
    peer._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
    return peer


def test_reconnect_reaches_a_live_proc_whose_connection_broke(faults, tmp_path):
    counter = tmp_path / "bootstraps"

    def count_bootstraps():
        with counter.open("a") as f:
            f.write("x")

    with this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=count_bootstraps, name="cutoff") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pid = rec.slice(gpus=1).where.call_one().get()["pid"]
        assert rec.slice(gpus=1).record.call_one("before").get() == 1
        gate = tmp_path / "open"
        in_flight = rec.slice(gpus=1).wait_for.call_one(str(gate))  # in flight until after the cut
        peer = cut(mesh, 1)
        with pytest.raises(ConnectionBroken):  # reached again at once, without reconnect()
            in_flight.get(timeout=60)
        gate.touch()
        assert peer.lost and mesh._group.peers[1] is not peer

        assert mesh.reconnect() == []  # nothing restarted
        assert rec.slice(gpus=1).where.call_one().get(timeout=60)["pid"] == pid
        assert rec.slice(gpus=1).record.call_one("after").get(timeout=60) == 2  # same actor, state kept
        assert counter.read_text() == "xx"  # the first bootstrap of each proc, none again

        os.kill(pid, signal.SIGKILL)  # watched again: its death is reported, and only it
        assert [f.crashed_ranks for f in faults.wait("rec")] == [[1]]


def test_reconnect_reaches_a_live_proc_that_could_not_be_told_alive(faults, tmp_path):
    with this_host().spawn_procs(per_host={"gpus": 1}, name="unknown") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pid = rec.where.call_one().get(timeout=60)["pid"]
        peer = mesh._group.peers[0]
        peer.identity = None  # as if the link broke before the proc said who it was
        gate = tmp_path / "open"
        in_flight = rec.wait_for.call_one(str(gate))  # in flight until after the cut
        cut(mesh, 0)
        with pytest.raises(SupervisionError) as lost:
            in_flight.get(timeout=60)
        gate.touch()
        assert not isinstance(lost.value, ConnectionBroken)
        assert faults.wait("rec")[0].crashed_ranks == [0]  # counted gone: a fault, as before
        assert mesh.reconnect() == []  # but it lives: reached again where it is
        assert rec.where.call_one().get(timeout=60)["pid"] == pid


def test_a_reconnect_whose_bootstrap_raised_bootstraps_again_the_next_time(faults, tmp_path):
    flag = tmp_path / "fail-once"

    def bootstrap():
        if flag.exists():
            flag.unlink()
            raise RuntimeError("bootstrap fails once")
        os.environ["TEST_BOOTSTRAPPED"] = str(os.getpid())

    with this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=bootstrap, name="unlucky") as mesh:
        rec = mesh.spawn("rec", Recorder)
        kill(rec, gpus=1)
        with pytest.raises(SupervisionError):
            rec.slice(gpus=1).echo.call_one(1).get(timeout=60)
        flag.touch()
        with pytest.raises(Exception, match="bootstrap fails once"):
            mesh.reconnect()
        assert mesh.reconnect() == [1]  # still to bootstrap: done now
        where = mesh.spawn("fresh", Recorder).where.call().get()
        assert where.item(gpus=1)["env"]["TEST_BOOTSTRAPPED"] == str(where.item(gpus=1)["pid"])
        assert mesh.reconnect() == []


class Journal(Actor):
    """Writes its tag to ``path`` in each ``__init__``: which spawns ran, and how often."""

    def __init__(self, path: str, tag: str) -> None:
        with open(path, "a") as f:
            f.write(tag + "\n")

    @endpoint
    def pid(self) -> int:
        return os.getpid()


def test_respawn_skips_the_actor_meshes_whose_handles_were_dropped(faults, tmp_path):
    journal = tmp_path / "journal"
    with this_host().spawn_procs(per_host={"gpus": 2}, name="forget") as mesh:
        kept = mesh.spawn("kept", Journal, str(journal), "kept")
        sliced = mesh.spawn("sliced", Journal, str(journal), "sliced").slice(gpus=1)  # only a slice is held
        dropped = mesh.spawn("dropped", Journal, str(journal), "dropped")
        pid = kept.slice(gpus=1).pid.call_one().get()
        assert sliced.pid.call_one().get() == pid and dropped.initialized.get() is None
        del dropped
        gc.collect()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError):
            kept.slice(gpus=1).pid.call_one().get(timeout=60)

        assert mesh.respawn() == [1]
        assert kept.slice(gpus=1).pid.call_one().get(timeout=60) != pid
        assert sliced.pid.call_one().get(timeout=60) != pid
        assert sorted(journal.read_text().split()) == sorted(["kept"] * 3 + ["sliced"] * 3 + ["dropped"] * 2)


def test_two_threads_respawning_at_once_start_one_proc(faults):
    """Each thread handling the same death calls respawn(): they take turns, so one new process
    takes the dead one's place, not two (one of them left running, untracked by stop())."""
    with this_host().spawn_procs(per_host={"gpus": 2}, name="twice") as mesh:
        rec = mesh.spawn("rec", Recorder)
        kill(rec, gpus=1)
        with pytest.raises(SupervisionError):
            rec.slice(gpus=1).echo.call_one(1).get(timeout=60)
        owner = mesh._group.owner
        real_revive, real_start = owner.revive, owner._start
        lock, entered, both_in = threading.Lock(), [], threading.Event()

        def revive(indices):
            with lock:
                entered.append(1)
                if len(entered) == 2:
                    both_in.set()
            return real_revive(indices)

        def start(indices):  # the first to start a proc lets the other look at the dead one first, if it can
            both_in.wait(5)
            return real_start(indices)

        owner.revive, owner._start = revive, start
        results = []
        threads = [threading.Thread(target=lambda: results.append(mesh.respawn())) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(results) == [[], [1]]
        assert owner.restarts == [0, 1]
        assert rec.slice(gpus=1).echo.call_one(2).get(timeout=60) == 2
