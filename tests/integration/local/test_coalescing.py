"""Coalesced frames between real procs and a real controller (see runtime/coalescing.py).

Aspects: pipelined calls come back in order with the right values, and the actor ran them in
order; a call made while another actor of the same proc is busy goes out when its caller waits
(it would wait forever behind the busy call otherwise); a reply held while more work was queued
reaches the caller while the next endpoint blocks, even when that endpoint blocks until the
caller acts on the reply; a one-way broadcast held behind a call in flight is delivered with no
later call and no wait; killing a proc with held requests and replies fails every pending call.
"""

import os
import signal
import time

import pytest

from mesh_client import SupervisionError, this_host
from mesh_client._src.runtime import coalescing
from tests.integration.local.coalescing_actors import WAIT_SECONDS, Sequencer

TIMEOUT = 120.0  # generous: a call that hangs fails the test, a slow machine does not


@pytest.fixture(scope="module")
def proc():
    with this_host().spawn_procs(per_host={"gpus": 1}, name="coal") as mesh:
        yield mesh


def test_pipelined_calls_come_back_in_order_and_run_in_order(proc):
    seq = proc.spawn("seq", Sequencer)
    futs = [seq.index.call_one(i) for i in range(3000)]
    assert [f.get(timeout=TIMEOUT) for f in futs] == list(range(3000))
    assert seq.history.call_one().get(timeout=TIMEOUT) == list(range(3000))
    seq.stop().get(timeout=TIMEOUT)


def test_a_call_behind_a_busy_actor_of_the_same_proc_completes_while_it_is_busy(proc, tmp_path):
    busy, other = proc.spawn("busy", Sequencer), proc.spawn("other", Sequencer)
    gate = str(tmp_path / "gate")
    long_call = busy.wait_for.call_one(gate)  # in flight until the gate opens
    assert other.index.call_one(5).get(timeout=TIMEOUT) == 5  # held (a call in flight), written by get
    assert not long_call.done()
    open(gate, "w").close()
    assert long_call.get(timeout=TIMEOUT) is True
    busy.stop().get(timeout=TIMEOUT)
    other.stop().get(timeout=TIMEOUT)


def test_a_held_reply_reaches_the_caller_while_the_next_endpoint_waits_for_the_caller(proc, tmp_path):
    seq = proc.spawn("seq", Sequencer)
    warm = str(tmp_path / "warm")
    open(warm, "w").close()
    for _ in range(3):  # both endpoints known quick: replies would be held through them
        seq.index.call_one(0).get(timeout=TIMEOUT)
        seq.wait_for.call_one(warm).get(timeout=TIMEOUT)
    gate = str(tmp_path / "gate")
    # Queued behind a pause, so the reply of index(1) is made while wait_for is queued after it.
    first = seq.pause.call_one(0.3)
    quick = seq.index.call_one(1)
    blocked = seq.wait_for.call_one(gate)  # returns only once this test has seen quick's reply
    assert quick.get(timeout=TIMEOUT) == 1
    assert not blocked.done()
    open(gate, "w").close()
    assert blocked.get(timeout=TIMEOUT) is True
    first.get(timeout=TIMEOUT)
    seq.stop().get(timeout=TIMEOUT)


def test_a_held_broadcast_is_delivered_without_a_later_call_or_wait(proc, tmp_path):
    busy, other = proc.spawn("busy", Sequencer), proc.spawn("other", Sequencer)
    gate, noted = str(tmp_path / "gate"), str(tmp_path / "noted")
    long_call = busy.wait_for.call_one(gate)  # a call in flight: the broadcast below may be held
    other.note.broadcast(noted, 42)
    # No call and no Future.get until it arrived: only the reactor can have written it.
    for _ in range(int(WAIT_SECONDS / 0.01)):
        if os.path.exists(noted):
            break
        time.sleep(0.01)
    assert os.path.exists(noted), "the one-way message never arrived"
    with open(noted) as f:
        assert f.read() == "42"
    assert not long_call.done()
    open(gate, "w").close()
    assert long_call.get(timeout=TIMEOUT) is True
    busy.stop().get(timeout=TIMEOUT)
    other.stop().get(timeout=TIMEOUT)


def test_killing_a_proc_with_held_requests_and_replies_fails_every_pending_call(faults, tmp_path):
    with this_host().spawn_procs(per_host={"gpus": 1}, name="coalkill") as mesh:
        seq, busy = mesh.spawn("seq", Sequencer), mesh.spawn("busy", Sequencer)
        pid = seq.pid.call_one().get(timeout=TIMEOUT)
        never = busy.wait_for.call_one(str(tmp_path / "never"))  # in flight: later requests may be held
        futs = [seq.index.call_one(i) for i in range(2000)]  # replies held while more are queued
        last = seq.wait_for.call_one(str(tmp_path / "never"))  # behind them: cannot finish before the kill
        os.kill(pid, signal.SIGKILL)
        outcomes = []
        for f in [never, *futs, last]:
            try:
                outcomes.append(f.get(timeout=TIMEOUT))
            except SupervisionError:
                outcomes.append("lost")
        assert outcomes[0] == "lost" and outcomes[-1] == "lost"  # the calls that could not have finished
        answered = [o for o in outcomes[1:-1] if o != "lost"]
        assert answered == list(range(len(answered)))  # those answered before the kill, in order
        faults.wait("seq")


def test_a_call_after_a_wait_goes_out_at_once_and_one_behind_a_call_in_flight_is_held(proc, tmp_path, monkeypatch):
    monkeypatch.setattr(coalescing, "HOLD_SECONDS", 600.0)  # only this test's own steps write what is held
    busy, seq = proc.spawn("busy", Sequencer), proc.spawn("seq", Sequencer)
    assert seq.index.call_one(0).get(timeout=TIMEOUT) == 0
    channel = seq._group.peers[0]._channel
    first = seq.index.call_one(1)  # only watches in flight: written now, by this thread
    assert not channel._outbox
    assert first.get(timeout=TIMEOUT) == 1
    gate = str(tmp_path / "gate")
    long_call = busy.wait_for.call_one(gate)  # after a wait: written at once too
    assert not channel._outbox
    behind = seq.index.call_one(2)  # back to back, a call in flight: held
    assert channel._outbox
    assert behind.get(timeout=TIMEOUT) == 2  # written by the wait
    open(gate, "w").close()
    assert long_call.get(timeout=TIMEOUT) is True
    busy.stop().get(timeout=TIMEOUT)
    seq.stop().get(timeout=TIMEOUT)
