"""Ports in one process, and a port's error as it arrives from another (its wire form).

Aspects: what ``Port.exception(e)`` sent is raised by ``recv()`` as ``e`` itself, whether it was
handed over in this process or arrived pickled from another; one this process cannot rebuild is
an ActorError that says why; ``Port.exception`` refuses what is not an exception; an explicit
response port's exception (a reply marked as sent) is raised by the caller as itself, while an
endpoint's own error stays an ActorError; a ranked receiver gives ``(rank, value)`` for what was
sent with a rank, raises the exception sent with one, and refuses what came without one, with
Monarch's first words; ``ranked()`` reads the same values as the receiver it came from; a ranked
port keeps its rank when pickled; ``open_ranked(once=True)`` is not once, as Monarch 0.7's; a second
``recv()`` of a once channel raises, as Monarch's; no thread waits for a value (a recv given up
on takes the next one, as Monarch's); a channel dropped by its holder leaves no registration.
"""

import pytest

from mesh_client import ActorError, Channel, RemoteException
from mesh_client._src.actor import messages, ports
from mesh_client._src.runtime import peers
from mesh_client._src.wire import serialization


class NeedsTwo(Exception):
    """Pickles, but cannot be rebuilt from its args (Monarch's receiver raises a TypeError)."""

    def __init__(self, a, b):
        super().__init__(a)


def wire(segments):
    return [bytes(s) for s in segments]


def test_an_exception_sent_to_a_port_is_raised_as_itself():
    port, receiver = Channel.open()
    port.exception(KeyError("pushed"))
    with pytest.raises(KeyError) as raised:
        receiver.recv().get()
    assert raised.value.args == ("pushed",)


def test_an_exception_from_another_process_is_raised_as_itself():
    port, receiver = Channel.open()
    ports.deliver(port._port_id, False, wire(messages.encode_failure(ValueError("bad 1"), sent=True)))
    with pytest.raises(ValueError, match="^bad 1$"):
        receiver.recv().get()


def test_one_that_cannot_be_rebuilt_here_is_an_actor_error_saying_why():
    port, receiver = Channel.open()
    ports.deliver(port._port_id, False, wire(messages.encode_failure(NeedsTwo("x", "y"), sent=True)))
    with pytest.raises(ActorError) as raised:
        receiver.recv().get()
    assert isinstance(raised.value.exception, RemoteException)
    assert "A value sent to a port was an error: NeedsTwo: x (a RemoteException here" in str(raised.value)


def test_port_exception_takes_only_exceptions():
    port, _ = Channel.open()
    with pytest.raises(TypeError, match="Port.exception takes an exception, e.g. ValueError"):
        port.exception("not an exception")


def test_a_reply_sent_with_port_exception_raises_itself_and_an_endpoint_error_stays_an_actor_error():
    sent = (peers.ERROR, wire(messages.encode_failure(ValueError("bad 1"), sent=True)), None)
    with pytest.raises(ValueError, match="^bad 1$"):
        messages.decode_reply("Actor call p.via_port", "procs0[gpus=0]", sent)
    raised = (peers.ERROR, wire(messages.encode_failure(ValueError("bad 2"))), None)
    with pytest.raises(ActorError, match="Actor call p.f failed on procs0"):
        messages.decode_reply("Actor call p.f", "procs0[gpus=0]", raised)


def test_a_ranked_receiver_pairs_each_value_with_the_rank_it_was_sent_with():
    port, receiver = Channel.open_ranked()
    port._ranked(1).send("one")
    ports.deliver(port._port_id, True, wire(serialization.dumps("three")), 3)
    assert [receiver.recv().get(), receiver.recv().get()] == [(1, "one"), (3, "three")]
    port._ranked(2).exception(KeyError("two"))
    with pytest.raises(KeyError):
        receiver.recv().get()


def test_a_ranked_receiver_refuses_what_came_without_a_rank():
    port, receiver = Channel.open_ranked()
    port.send("no rank")
    with pytest.raises(ValueError, match="^RankedPort receiver got a message without a rank"):
        receiver.recv().get()


def test_ranked_reads_the_same_values_as_its_receiver():
    port, receiver = Channel.open()
    ranked = receiver.ranked()
    port._ranked(0).send("a")
    port._ranked(5).send("b")
    assert receiver.recv().get() == "a" and ranked.recv().get() == (5, "b")


def test_a_ranked_port_keeps_its_rank_when_pickled(monkeypatch):
    port, _ = Channel.open()
    monkeypatch.setattr(ports, "home_provider", lambda: (("127.0.0.1", 1), b"token", None))  # no proc server here
    again = serialization.loads(serialization.dumps(port._ranked(4)))
    assert again._rank == 4 and again._port_id == port._port_id


def test_open_ranked_takes_once_and_keeps_taking_values_as_monarchs_does():
    port, receiver = Channel.open_ranked(once=True)
    port._ranked(0).send("a")
    port._ranked(1).send("b")
    assert [receiver.recv().get(), receiver.recv().get()] == [(0, "a"), (1, "b")]


def test_a_once_channel_gives_one_value_and_refuses_a_second_recv():
    """Monarch raises "OncePort is already used"; the second recv() waited for ever (and held a
    thread)."""
    port, receiver = Channel.open(once=True)
    port.send("only")
    assert receiver.recv().get(timeout=10) == "only"
    with pytest.raises(ValueError, match="OncePort is already used"):
        receiver.recv().get(timeout=10)


def test_a_recv_given_up_on_holds_no_thread_and_takes_the_next_value():
    """No thread waits for a value; a recv whose wait timed out still takes the next value
    (Monarch's order), and the recv after it the one after."""
    import threading

    port, receiver = Channel.open()
    before = threading.active_count()
    abandoned = []
    for _ in range(50):
        fut = receiver.recv()
        with pytest.raises(TimeoutError):
            fut.get(timeout=0.001)
        abandoned.append(fut)
    assert threading.active_count() == before
    for i in range(51):
        port.send(i)
    assert [f.get(timeout=5) for f in abandoned] == list(range(50))
    assert receiver.recv().get(timeout=5) == 50


def test_a_dropped_channel_leaves_no_registration():
    import gc

    gc.collect()  # channels of earlier tests, dropped already
    before = len(ports._local)
    kept_port, kept = Channel.open()
    for _ in range(200):
        port, receiver = Channel.open()
        port.send(1)  # undelivered values go with it
        ranked_port, ranked = Channel.open_ranked()
    del receiver, ranked_port, ranked
    gc.collect()
    assert len(ports._local) == before + 1  # only the channel still held
    port.send(2)  # its receiver is gone: dropped, as a value sent from another proc would be
    kept_port.send("x")
    assert kept.recv().get(timeout=5) == "x"
