"""The proc server's dispatch over an in-memory stream: the real ProcServer, Channel and
Connection, with a client Connection answering what the server wrote.

Aspects: IDENTIFY, an unknown operation and a call to a missing actor are answered, with the
requests split one byte per read; a malformed envelope after authentication drops the
connection (logged once); a connect and close is no refusal, garbage is one; every closed
channel leaves the server's books (connections and handshake deadlines).
"""

import json
import socket

import pytest

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
    yield ProcServer(listener, TOKEN, identity={"mesh": "m", "rank": 3}, on_stop=lambda: None)
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
                        on_stop=lambda: [ch.close("stopped") for ch in channels])
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
