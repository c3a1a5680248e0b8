"""The sans-IO connection: handshake, framing, limits.

Aspects: a full handshake between two ends; a wrong token on either side; frames split at every
byte and truncated; oversized frames before and after authentication; garbage; frames of the
wrong kind for the state; large frames read through receive_buffer; the state shown in repr.
"""

import pickle

import pytest

from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.wire import auth, errors, frames, protocol, versions
from mesh_client._src.wire.protocol import NEED_DATA, Connection, Role, State

TOKEN = b"s3cret-token"


def pump(a: Connection, b: Connection) -> list:
    """Move handshake bytes both ways until both sides are quiet; return b's events."""
    events = []
    for _ in range(10):
        for src, dst in ((a, b), (b, a)):
            data = src.data_to_send()
            if data:
                dst.receive_data(data)
            while True:
                ev = dst.next_event()
                if ev is NEED_DATA:
                    break
                if dst is b:
                    events.append(ev)
    return events


def authenticated_pair() -> tuple[Connection, Connection]:
    server, client = Connection(Role.SERVER, TOKEN), Connection(Role.CLIENT, TOKEN)
    server.start()
    client.start()
    pump(server, client)
    pump(client, server)
    assert server.state is State.AUTHENTICATED and client.state is State.AUTHENTICATED
    return server, client


def test_handshake_authenticates_both_sides():
    server, client = Connection(Role.SERVER, TOKEN), Connection(Role.CLIENT, TOKEN)
    server.start()
    client.start()
    client.receive_data(server.data_to_send())  # HELLO
    assert client.next_event() is NEED_DATA
    server.receive_data(client.data_to_send())  # AUTH
    assert isinstance(server.next_event(), protocol.Authenticated)
    client.receive_data(server.data_to_send())  # WELCOME
    assert isinstance(client.next_event(), protocol.Authenticated)
    assert "AUTHENTICATED" in repr(client)


def test_wrong_client_token_is_rejected_with_a_reason():
    server, client = Connection(Role.SERVER, TOKEN), Connection(Role.CLIENT, b"wrong")
    server.start()
    client.start()
    client.receive_data(server.data_to_send())
    client.next_event()
    server.receive_data(client.data_to_send())
    with pytest.raises(errors.AuthenticationError):
        server.next_event()
    assert server.state is State.CLOSED
    client.receive_data(server.data_to_send())  # REJECT
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        client.next_event()


def test_client_refuses_a_server_without_the_token():
    server, client = Connection(Role.SERVER, b"other"), Connection(Role.CLIENT, TOKEN)
    server.start()
    client.start()
    client.receive_data(server.data_to_send())
    client.next_event()
    # The impostor cannot compute the WELCOME MAC; it forges one.
    client.receive_data(frames.encode_bytes(frames.Kind.WELCOME, [b"\0" * 32]))
    with pytest.raises(errors.AuthenticationError, match="could not prove"):
        client.next_event()


def test_message_before_authentication_is_refused_without_reading_it():
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    evil = pickle.dumps(("anything",))
    server.receive_data(frames.encode_bytes(frames.Kind.MESSAGE, [evil]))
    with pytest.raises(errors.ProtocolError, match="unexpected MESSAGE frame in state AWAIT_AUTH"):
        server.next_event()


def test_messages_roundtrip_when_split_at_every_byte():
    server, client = authenticated_pair()
    segments = [b"head", b"", b"x" * 1000]
    wire = b"".join(bytes(p) for p in client.send_message(segments)) * 2
    got = []
    for i in range(len(wire)):
        server.receive_data(wire[i : i + 1])
        while (ev := server.next_event()) is not NEED_DATA:
            got.append([bytes(s) for s in ev.segments])
    assert got == [segments, segments]


def test_large_frames_fill_a_dedicated_buffer():
    server, client = authenticated_pair()
    big = bytes(range(256)) * 1024  # 256 KiB, above LARGE_FRAME
    stream = MockStream([b"".join(bytes(p) for p in client.send_message([b"h", big]))])
    while True:
        view = server.receive_buffer()
        if view is not None:
            server.buffer_filled(stream.read_into(view))
        else:
            server.receive_data(stream.read(7000))
        ev = server.next_event()
        if ev is not NEED_DATA:
            break
    assert isinstance(ev, protocol.Message)
    assert bytes(ev.segments[0]) == b"h" and bytes(ev.segments[1]) == big


def test_truncated_frame_is_a_protocol_error():
    server, client = authenticated_pair()
    wire = b"".join(bytes(p) for p in client.send_message([b"abcdef"]))
    server.receive_data(wire[:-2])
    assert server.next_event() is NEED_DATA
    server.receive_data(b"")
    with pytest.raises(errors.ProtocolError, match="middle of a frame"):
        server.next_event()


def test_clean_end_of_stream_is_closed():
    server, _ = authenticated_pair()
    server.receive_data(b"")
    assert isinstance(server.next_event(), protocol.Closed)


def test_oversized_handshake_frame_is_refused_before_it_arrives():
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    header = frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.AUTH, 1, 0) + frames.LENGTH.pack(10**9)
    server.receive_data(header)
    with pytest.raises(errors.FrameTooLarge, match="exceeds the limit of 1024 bytes"):
        server.next_event()


def test_oversized_message_is_refused_from_its_header():
    server = Connection(Role.SERVER, TOKEN, max_message_bytes=1000)
    client = Connection(Role.CLIENT, TOKEN)
    server.start()
    client.start()
    pump(server, client)
    pump(client, server)
    header = frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, 2, 0)
    server.receive_data(header + frames.LENGTH.pack(600) + frames.LENGTH.pack(600))
    with pytest.raises(errors.FrameTooLarge, match="PROCMESH_MAX_MESSAGE_BYTES"):
        server.next_event()


@pytest.mark.parametrize(
    "data, match",
    [
        (b"GET / HTTP/1.1\r\n\r\n", "bad frame magic"),
        (frames.HEADER.pack(frames.MAGIC, 9, 2, 1, 0), "wire version 9"),
        (frames.HEADER.pack(frames.MAGIC, frames.VERSION, 99, 1, 0), "unknown frame kind 99"),
        (frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.AUTH, 3, 0), "exactly one segment"),
    ],
)
def test_garbage_is_a_protocol_error(data, match):
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    server.receive_data(data)
    with pytest.raises(errors.ProtocolError, match=match):
        server.next_event()


def test_send_error_tells_the_peer_why():
    server, client = authenticated_pair()
    client.receive_data(server.send_error("going away"))
    ev = client.next_event()
    assert isinstance(ev, protocol.Closed) and ev.reason == "going away"


def test_empty_token_is_refused():
    with pytest.raises(ValueError, match="PROCMESH_TOKEN"):
        Connection(Role.SERVER, b"")


def test_a_client_refuses_a_server_of_another_protocol_version_before_sending_anything():
    old_server = Connection(Role.SERVER, TOKEN, protocol_version=0)  # what releases before versions sent
    client = Connection(Role.CLIENT, TOKEN)
    old_server.start()
    client.start()
    client.receive_data(old_server.data_to_send())  # HELLO
    with pytest.raises(errors.VersionMismatch) as refused:
        client.next_event()
    message = str(refused.value)
    assert "this client (procmesh " in message and f"speaks protocol {versions.PROTOCOL_VERSION}" in message
    assert "the proc server speaks no protocol version (a procmesh release from before protocol versions)" in message
    assert "proc-server image built from this client's procmesh version" in message
    assert client.data_to_send() == b"" and client.state is State.CLOSED  # no AUTH went out


def test_a_server_rejects_a_client_of_another_protocol_version_once_its_token_is_proved():
    server, old_client = Connection(Role.SERVER, TOKEN), Connection(Role.CLIENT, TOKEN, protocol_version=7)
    server.start()
    old_client.start()
    hello = server.data_to_send()
    assert frames.header_field(hello) == versions.PROTOCOL_VERSION
    old_client.receive_data(hello)
    with pytest.raises(errors.VersionMismatch):  # a client of protocol 7 refuses it too
        old_client.next_event()
    # The AUTH of a client that ignores the field (as releases before versions did), sent with 7:
    mac = auth.client_mac(TOKEN, hello[-auth.NONCE_BYTES:], b"n" * auth.NONCE_BYTES)
    server.receive_data(frames.encode_bytes(frames.Kind.AUTH, [b"n" * auth.NONCE_BYTES + mac], 7))
    with pytest.raises(errors.VersionMismatch, match=r"the client speaks protocol 7, this proc server \(procmesh "):
        server.next_event()
    assert server.state is State.CLOSED


def test_a_wrong_token_is_told_before_the_version():
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    hello = server.data_to_send()
    mac = auth.client_mac(b"wrong", hello[-auth.NONCE_BYTES:], b"n" * auth.NONCE_BYTES)
    server.receive_data(frames.encode_bytes(frames.Kind.AUTH, [b"n" * auth.NONCE_BYTES + mac], 0))
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        server.next_event()
