"""A connection that breaks under a live local proc is not a dead proc (runtime/relinking.py).

Aspects: with the default ``unhandled_fault_hook`` (an unhandled fault ends the controller), a
controller whose TCP connection to one proc is cut underneath it (``shutdown()`` of the socket)
lives on: the call in flight at the cut fails at once with ``ConnectionBroken``, saying the proc
is alive and the call may or may not have run; later calls reach the same process and actor,
its state kept; a real death of that proc afterwards still ends the controller (its actors are
watched again over the new connection). In process: no fault reaches the hook for the cut, a
call made on the old peer goes to its successor, and a proc whose link broke because it died
is reported as before; a Ctrl-C that cuts a large send short breaks the link (the proc would read
the next call as the rest of the half-written one, and every later call would hang), and the
same proc is reached again; Ctrl-Cs caught by a main thread that calls break no link (a frame
known to have gone out whole is no cut); a second break right after a relink is a broken link
too (the successor knows its proc).
"""

import functools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mesh_client import ConnectionBroken, SupervisionError, this_host
from mesh_client._src.actor import supervision
from mesh_client._src.runtime import ops, peers
from tests.integration.local.actors import Recorder


def cut(mesh, index):
    """Break the client's connection (TCP or unix) to proc ``index`` underneath it (the proc lives on)."""
    peer = mesh._group.peers[index]
    peer._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
    return peer


def noticed(peer):
    """``peer`` once its I/O thread has seen the cut (the relink has begun)."""
    deadline = time.monotonic() + 60
    while peer.verdict is None:
        assert time.monotonic() < deadline, "the cut was never noticed"
        time.sleep(0.001)
    return peer


def settle_supervision():
    """Wait until the supervision thread has handled what was queued before (the failed watches)."""
    done = threading.Event()
    supervision.submit(done.set)
    assert done.wait(60)


CONTROLLER = textwrap.dedent(
    """
    import os, signal, socket, sys, tempfile, time
    from mesh_client import ConnectionBroken, this_host
    from tests.integration.local.actors import Recorder
    from tests.integration.local.test_broken_links import cut, settle_supervision

    mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="links")
    second = mesh.spawn("rec", Recorder).slice(gpus=1)
    pid = second.where.call_one().get(timeout=60)["pid"]
    assert second.record.call_one("before").get(timeout=60) == 1
    gate = os.path.join(tempfile.mkdtemp(), "open")
    in_flight = second.wait_for.call_one(gate)
    cut(mesh, 1)
    try:
        in_flight.get(timeout=60)
        print("the call in flight succeeded")
    except ConnectionBroken as exc:
        print(f"in flight: {exc}")
    open(gate, "w").close()
    settle_supervision()
    print(f"same pid: {second.where.call_one().get(timeout=60)['pid'] == pid}")
    print(f"after: {second.record.call_one('after').get(timeout=60)}")
    settle_supervision()
    print("survived the cut", flush=True)
    os.kill(pid, signal.SIGKILL)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted by the fault")
        raise SystemExit(1)
    print("still running")
    """
)


def test_a_cut_connection_leaves_the_controller_running_and_a_death_still_ends_it():
    done = subprocess.run([sys.executable, "-c", CONTROLLER], capture_output=True, text=True, timeout=180,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = done.stdout
    assert "in flight: Endpoint call rec.wait_for() failed: the connection to proc links[gpus=1]" in out, (out, done.stderr)
    assert "but the proc is alive" in out and "may or may not have run" in out
    assert "same pid: True" in out
    assert "after: 2" in out  # the same actor, its state kept
    assert "survived the cut" in out
    assert "interrupted by the fault" in out and done.returncode == 1  # the death, watched again
    assert done.stderr.count("unhandled supervision event") == 1
    assert "killed by SIGKILL" in done.stderr


def test_no_fault_for_a_cut_and_the_old_peer_forwards(faults, tmp_path):
    with this_host().spawn_procs(per_host={"gpus": 2}, name="cutin") as mesh:
        rec = mesh.spawn("rec", Recorder)
        first = rec.slice(gpus=0)
        assert first.record.call_one("a").get(timeout=60) == 1
        gate = tmp_path / "open"
        in_flight = first.wait_for.call_one(str(gate))  # held until the gate opens, after the cut
        old = cut(mesh, 0)
        with pytest.raises(ConnectionBroken, match="may or may not have run"):
            in_flight.get(timeout=60)
        gate.touch()
        assert old.relinked() is mesh._group.peers[0] is not old  # the successor, swapped in the group
        status, _, _ = old.request((ops.IDENTIFY,), (), lambda raw: raw).get(timeout=60)
        assert status == peers.OK  # a holder of the old peer is served by its successor
        assert first.record.call_one("b").get(timeout=60) == 2
        settle_supervision()
        assert faults.named("rec") == []
        assert mesh.reconnect() == []  # nothing to bring back


def test_a_second_cut_right_after_a_relink_is_a_broken_link_too(faults):
    """The successor knows who its proc is from the start: a second break before it could have
    asked (a Ctrl-C storm cutting writes short) is not taken for a proc never identified."""
    with this_host().spawn_procs(per_host={"gpus": 1}, name="twice") as mesh:
        rec = mesh.spawn("rec", Recorder)
        assert rec.record.call_one("a").get(timeout=60) == 1
        old = noticed(cut(mesh, 0))
        successor = old.relinked()
        assert successor is not None and successor.identity is old.identity  # not asked again
        noticed(cut(mesh, 0))  # at once: no IDENTIFY was sent on the new link
        assert successor.relinked() is mesh._group.peers[0] not in (None, old, successor)
        assert rec.record.call_one("b").get(timeout=60) == 2  # the same actor
        settle_supervision()
        assert faults.named("rec") == []


def test_a_proc_that_died_is_still_a_fault(faults):
    with this_host().spawn_procs(per_host={"gpus": 1}, name="dies") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pid = rec.where.call_one().get(timeout=60)["pid"]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError) as lost:
            rec.echo.call_one(1).get(timeout=60)
        assert not isinstance(lost.value, ConnectionBroken)
        assert "the local backend restarts no proc by itself" in str(lost.value)
        assert faults.wait("rec")[0].crashed_ranks == [0]
        assert mesh._group.peers[0].relinked() is None


def test_a_cut_under_a_tree_routed_call_is_a_broken_link_too(faults, tmp_path):
    from mesh_client import options

    with this_host().spawn_procs(per_host={"gpus": 3}, name="treecut") as mesh:
        before = options.tree_fanout_min, options.tree_branching
        options.tree_fanout_min, options.tree_branching = 1, 2  # 0 forwards to 2: the cut holds a subtree
        try:
            rec = mesh.spawn("rec", Recorder)
        finally:
            options.tree_fanout_min, options.tree_branching = before
        assert list(rec.record.call("a").get(timeout=60).values()) == [1, 1, 1]
        gate = tmp_path / "open"
        in_flight = rec.wait_for.call(str(gate))  # held until the gate opens, after the cut
        cut(mesh, 0)
        with pytest.raises(ConnectionBroken, match=r"treecut\[gpus=0\].*but the proc is alive.*may or may not have run"):
            in_flight.get(timeout=60)
        gate.touch()
        assert list(rec.record.call("b").get(timeout=60).values()) == [2, 2, 2]  # through the new link
        settle_supervision()
        assert faults.named("rec") == []


def cut_links_to(address):
    """Run in a proc: break its connections to the proc server at ``address`` (that proc lives on)."""
    n = 0
    for (where, _, _), peer in list(peers._peers.items()):
        if tuple(where) == tuple(address) and peer._channel is not None:
            peer._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
            n += 1
    return n


def test_a_forwarder_whose_link_to_a_live_child_broke_says_so(faults, tmp_path):
    from mesh_client import options

    with this_host().spawn_procs(per_host={"gpus": 3}, name="fwdcut") as mesh:
        before = options.tree_fanout_min, options.tree_branching
        options.tree_fanout_min, options.tree_branching = 1, 2  # 0 forwards to 2
        try:
            rec = mesh.spawn("rec", Recorder)
        finally:
            options.tree_fanout_min, options.tree_branching = before
        assert list(rec.record.call("a").get(timeout=60).values()) == [1, 1, 1]
        gate = tmp_path / "open"
        in_flight = rec.wait_for.call(str(gate))  # held until the gate opens, however long the cut takes
        assert mesh.slice(gpus=0).run(functools.partial(cut_links_to, mesh._group.addresses[2])).get(timeout=60) == [1]
        with pytest.raises(ConnectionBroken, match=r"fwdcut\[gpus=2\].*but the proc is alive.*may or may not have run"):
            in_flight.get(timeout=60)
        gate.touch()
        assert list(rec.record.call("b").get(timeout=60).values()) == [2, 2, 2]  # proc 0 reached 2 again
        settle_supervision()
        assert faults.named("rec") == []



class Interrupted(Exception):
    """What the test's signal handler raises in the main thread, as SIGINT raises KeyboardInterrupt."""


def raise_inside_a_write(stopped_pid: int, done: threading.Event):
    """A signal handler that raises only inside a socket write (a Ctrl-C landing while a large
    send blocks), letting the proc that was not reading go on first."""
    def handler(signum, frame):
        if frame is not None and frame.f_code.co_filename.endswith(os.path.join("runtime", "streams.py")):
            os.kill(stopped_pid, signal.SIGCONT)
            done.set()
            raise Interrupted()

    return handler


def keep_signalling(main: int, done: threading.Event) -> None:
    while not done.wait(0.01):
        signal.pthread_kill(main, signal.SIGUSR1)


def test_an_interrupted_large_send_breaks_the_link_and_later_calls_do_not_hang(faults):
    """A Ctrl-C while a large request is being written leaves part of its frame on the wire: the
    proc would read the next call as the rest of it, and every later call would hang."""
    with this_host().spawn_procs(per_host={"gpus": 1}, name="cutshort") as mesh:
        rec = mesh.spawn("rec", Recorder)
        pid = rec.where.call_one().get(timeout=60)["pid"]
        old, done = mesh._group.peers[0], threading.Event()
        previous = signal.signal(signal.SIGUSR1, raise_inside_a_write(pid, done))
        os.kill(pid, signal.SIGSTOP)  # it reads nothing: the write blocks once the socket is full
        try:
            threading.Thread(target=keep_signalling, args=(threading.main_thread().ident, done), daemon=True).start()
            with pytest.raises(Interrupted):
                rec.echo.call_one(bytearray(64 << 20))
        finally:
            done.set()
            os.kill(pid, signal.SIGCONT)
            signal.signal(signal.SIGUSR1, previous)
        old.relinked()  # the reconnection, if the link was broken (bounded)
        assert rec.record.call_one("after").get(timeout=60) == 1  # the same actor answers
        assert rec.where.call_one().get(timeout=60)["pid"] == pid
        assert "interrupted part way through a message (Interrupted)" in (old.lost or "")
        assert old.relinked() is mesh._group.peers[0] is not old  # the same process, reached again
        settle_supervision()
        assert faults.named("rec") == []


CTRL_C_STORM = textwrap.dedent(
    """
    import collections, os, signal, threading, time
    from mesh_client import this_host
    from tests.integration.local.actors import Recorder

    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="storm")
    rec = mesh.spawn("rec", Recorder)
    rec.echo.call_one(0).get(timeout=60)
    seen, done = collections.Counter(), threading.Event()

    def other():  # never interrupted: only the main thread gets SIGINT
        while not done.is_set():
            try:
                assert rec.echo.call_one("bg").get(timeout=60) == "bg"
                seen["other ok"] += 1
            except Exception as exc:
                seen[f"other {type(exc).__name__}: {exc}"] += 1

    def interrupts():
        for _ in range(40):
            time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGINT)
        done.set()

    threads = [threading.Thread(target=other), threading.Thread(target=interrupts)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    # Every line of this loop is inside a try: a Ctrl-C handled in the loop's own bookkeeping
    # (its condition, an except body: the main thread descheduled there on a loaded machine)
    # is counted too, not the script's end. What the calls do is what is tested.
    while True:
        try:
            try:
                if done.is_set() or time.monotonic() > deadline:
                    break
                for i in range(50):
                    assert rec.echo.call_one(i).get(timeout=60) == i
                    seen["main ok"] += 1
            except KeyboardInterrupt:
                seen["main KeyboardInterrupt"] += 1
            except Exception as exc:
                seen[f"main {type(exc).__name__}: {exc}"] += 1
        except KeyboardInterrupt:  # another, in the except body above
            seen["main KeyboardInterrupt"] += 1
    for t in threads:
        t.join(60)
    print(dict(seen), flush=True)
    mesh.stop().get(timeout=60)
    """
)


def test_ctrl_cs_caught_by_a_calling_main_thread_break_no_link():
    """A notebook's interrupts: each Ctrl-C lands in the main thread's loop of calls, often right
    as a call was written (runtime/_sends.c keeps how much went out). A frame that went out whole
    is no reason to break the link: no call of another thread fails, none is reported lost."""
    done = subprocess.run([sys.executable, "-c", CTRL_C_STORM], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    seen = eval(done.stdout.strip().splitlines()[-1])  # the counter's dict, printed by the script
    assert seen.get("main KeyboardInterrupt", 0) >= 1 and seen.get("other ok", 0) >= 1, seen
    assert set(seen) <= {"main ok", "main KeyboardInterrupt", "other ok"}, seen  # no ConnectionBroken
    assert "unhandled supervision event" not in done.stderr, done.stderr
