"""The proc server's dispatch over an in-memory stream: the real ProcServer, Channel and
Connection, with a client Connection answering what the server wrote.

Aspects: IDENTIFY, an unknown operation and a call to a missing actor are answered, with the
requests split one byte per read; a malformed envelope after authentication drops the
connection (logged once); a connect and close is no refusal, garbage is one; every closed
channel leaves the server's books (connections and handshake deadlines); request fields that
name code are refused without running it; a spawn of the wrong field types starts no thread, one
of an actor id that runs already is refused and leaves that actor.
"""

import json
import socket

import pytest

from mesh_client import Actor, endpoint
from mesh_client._src.actor import messages
from mesh_client._src.actor.errors import ActorError
from mesh_client._src.runtime import ops
from mesh_client._src.runtime.channel import ChannelState, CloseKind
from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.server.dispatch import ProcServer
from mesh_client._src.wire import envelopes, frames, protocol, serialization

TOKEN = b"dispatch-token"


@pytest.fixture
def server():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    yield ProcServer(listener, TOKEN, identity={"mesh": "m", "rank": 3}, on_stop=lambda reason: None)
    listener.close()


def authenticated(server):
    """A server channel over a fresh in-memory stream, and a client that has authenticated."""
    stream = MockStream([])
    ch = server.open_channel(stream, "memory")
    client = protocol.Connection(protocol.Role.CLIENT, TOKEN)
    client.start()
    client.receive_data(bytes(stream.written))
    assert client.next_event() is protocol.NEED_DATA
    stream.written.clear()
    stream.feed(client.data_to_send())
    ch.on_readable()
    client.receive_data(bytes(stream.written))
    assert isinstance(client.next_event(), protocol.Authenticated)
    stream.written.clear()
    assert ch.state is ChannelState.ACTIVE and ch not in server.handshaking
    return ch, stream, client


def replies(client, stream):
    client.receive_data(bytes(stream.written))
    stream.written.clear()
    out = {}
    while (event := client.next_event()) is not protocol.NEED_DATA:
        reply = envelopes.decode_reply(event.segments)
        out[reply.call_id] = reply
    return out


def test_requests_split_one_byte_per_read_are_answered(server):
    ch, stream, client = authenticated(server)
    requests = [
        envelopes.encode_request(1, (ops.IDENTIFY,), ()),
        envelopes.encode_request(2, (99,), ()),
        envelopes.encode_request(3, (ops.CALL, "nobody", "go", 0, (), ()), serialization.dumps(((), {}))),
    ]
    data = b"".join(frames.encode_bytes(frames.Kind.MESSAGE, r) for r in requests)
    stream.feed(*(data[i : i + 1] for i in range(len(data))))
    while stream.pending:
        ch.on_readable()
    got = replies(client, stream)
    assert got[1].status == envelopes.OK
    assert json.loads(bytes(got[1].payload[0]))["rank"] == 3
    for call_id, error in ((2, "unknown operation 99"), (3, "no actor 'nobody'")):
        assert got[call_id].status == envelopes.ERROR
        with pytest.raises(ActorError, match=error):
            messages.decode_reply("call", "memory", (got[call_id].status, got[call_id].payload, None))


def test_a_malformed_envelope_drops_the_connection(server, capsys):
    ch, stream, client = authenticated(server)
    stream.feed(frames.encode_bytes(frames.Kind.MESSAGE, [b"not a pickle"]))
    ch.on_readable()
    assert ch.close_kind is CloseKind.PROTOCOL_ERROR and "envelope" in ch.close_reason
    assert ch not in server.channels
    assert capsys.readouterr().err.count("dropped connection") == 1


def test_a_connect_and_close_is_no_refusal_but_garbage_is(server, capsys):
    probe = server.open_channel(MockStream([]), "probe")
    probe.on_readable()  # end of stream, nothing received
    attacker = server.open_channel(MockStream([b"\x16\x03\x01 TLS hello"]), "attacker")
    attacker.on_readable()
    assert (probe.close_kind, attacker.close_kind) == (CloseKind.PEER_LEFT, CloseKind.PROTOCOL_ERROR)
    assert server.refusals.events == 1
    err = capsys.readouterr().err
    assert "attacker" in err and "probe" not in err
    assert not server.channels and not server.handshaking


def test_requests_of_one_read_are_answered_in_order_and_a_stop_ends_the_read():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    channels = []
    server = ProcServer(listener, TOKEN, identity={"mesh": "m", "rank": 3},
                        on_stop=lambda reason: [ch.close("stopped") for ch in channels])
    try:
        ch, stream, client = authenticated(server)
        channels.append(ch)
        requests = [envelopes.encode_request(1, (ops.IDENTIFY,), ()), envelopes.encode_request(2, (99,), ()),
                    envelopes.encode_request(3, (ops.STOP,), ()), envelopes.encode_request(4, (ops.IDENTIFY,), ())]
        stream.feed(b"".join(frames.encode_bytes(frames.Kind.MESSAGE, r) for r in requests))  # one read
        ch.on_readable()
        got = replies(client, stream)
        assert list(got) == [1, 2, 3]  # in order; the STOP closed the channel, so 4 gets no answer
        assert [got[i].status for i in (1, 2, 3)] == [envelopes.OK, envelopes.ERROR, envelopes.OK]
        assert ch.state is ChannelState.CLOSED
    finally:
        listener.close()


class _MakesDirectory:
    """Pickles as a call to os.mkdir: run by whoever unpickles it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        import os

        return (os.mkdir, (self.path,))


def test_request_fields_that_name_code_are_refused_unrun(server, capsys, tmp_path):
    """The fields are decoded on the I/O thread: plain values only (a pickle that imported and
    called something ran there: a sleep stalled every connection, a SystemExit ended the thread)."""
    ch, stream, client = authenticated(server)
    marker = tmp_path / "ran"
    request = envelopes.encode_request(1, (ops.WATCH, _MakesDirectory(str(marker))), ())
    stream.feed(frames.encode_bytes(frames.Kind.MESSAGE, request))
    ch.on_readable()
    assert ch.close_kind is CloseKind.PROTOCOL_ERROR
    assert "a request's fields are plain values" in ch.close_reason and "posix.mkdir" in ch.close_reason
    assert not marker.exists()


def test_a_spawn_with_fields_of_the_wrong_types_starts_no_thread(server, capsys):
    import threading

    ch, stream, client = authenticated(server)
    before = {t for t in threading.enumerate() if t.name.startswith("actor:")}
    request = envelopes.encode_request(1, (ops.SPAWN, ["not", "a", "string"], "name", 0, (), ()), serialization.dumps(None))
    stream.feed(frames.encode_bytes(frames.Kind.MESSAGE, request))
    ch.on_readable()
    assert ch.close_kind is CloseKind.PROTOCOL_ERROR and "a spawn names its actor with strings" in ch.close_reason
    assert {t for t in threading.enumerate() if t.name.startswith("actor:")} <= before and not server.actors


class Answers(Actor):
    @endpoint
    def answer(self) -> int:
        return 42


def test_a_spawn_of_an_actor_id_that_runs_already_is_refused(server):
    from mesh_client._src.actor.context import Creator

    ch, stream, client = authenticated(server)
    spawn = serialization.dumps((Answers, (), {}, None, Creator("root", "<root>")))
    for call_id in (1, 2):
        request = envelopes.encode_request(call_id, (ops.SPAWN, "answers-1", "answers", 0, (), ()), spawn)
        stream.feed(frames.encode_bytes(frames.Kind.MESSAGE, request))
        ch.on_readable()
    first = server.actors["answers-1"]
    got = wait_for_replies(ch, client, stream, 2)
    assert got[1].status == envelopes.OK and got[2].status == envelopes.ERROR
    with pytest.raises(ActorError, match="actor 'answers-1' already runs in this proc"):
        messages.decode_reply("spawn", "memory", (got[2].status, got[2].payload, None))
    assert server.actors["answers-1"] is first
    stream.feed(frames.encode_bytes(frames.Kind.MESSAGE, envelopes.encode_request(3, (ops.STOP_ACTOR, "answers-1", "done"), ())))
    ch.on_readable()
    assert wait_for_replies(ch, client, stream, 1)[3].status == envelopes.OK


def wait_for_replies(ch, client, stream, count, seconds=30.0):
    """The replies that actor threads write, once ``count`` have come (read under the channel's
    send lock: a write may be under way meanwhile)."""
    import time

    got = {}
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        with ch._send_lock:
            written = bytes(stream.written)
            stream.written.clear()
        if written:  # b"" would be the end of the stream
            client.receive_data(written)
        while (event := client.next_event()) is not protocol.NEED_DATA:
            reply = envelopes.decode_reply(event.segments)
            got[reply.call_id] = reply
        time.sleep(0.01)
    return got
