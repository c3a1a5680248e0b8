"""A server channel over an in-memory stream: the real Channel and Connection, no socket.

Aspects: the handshake and messages arrive intact whatever the chunking (split at every byte,
one byte per read, a large frame split around its header); the channel answers HELLO and
WELCOME; end of stream between frames closes it as PEER_LEFT; end of stream inside a frame is a
PROTOCOL_ERROR with last words to the peer; a channel over a stream without a socket refuses
to be registered with the reactor. Each on the wire's C frames and on their Python twins.
"""

import pytest

from mesh_client._src.runtime import channel as channel_mod
from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.wire import frames, protocol, versions
from tests.unit.frames_paths import frames_path  # noqa: F401  (the fixture below)

pytestmark = pytest.mark.usefixtures("frames_path")  # on the C frames and on their Python twins

TOKEN = b"in-memory-token"


def server_nonce(n):
    return b"s" * n


def client_nonce(n):
    return b"c" * n


def client_bytes(messages):
    """What an authenticating client sends: its AUTH, then ``messages`` as MESSAGE frames."""
    server = protocol.Connection(protocol.Role.SERVER, TOKEN, nonce=server_nonce)
    client = protocol.Connection(protocol.Role.CLIENT, TOKEN, nonce=client_nonce)
    server.start()
    client.start()
    client.receive_data(server.data_to_send())
    assert client.next_event() is protocol.NEED_DATA
    auth = client.data_to_send()
    server.receive_data(auth)
    assert isinstance(server.next_event(), protocol.Authenticated)
    welcome = server.data_to_send()
    return auth + b"".join(frames.encode_bytes(frames.Kind.MESSAGE, m) for m in messages), welcome


def run_server(chunks):
    """Drive a server channel over ``chunks`` until the stream ends; return what happened."""
    stream = MockStream(chunks)
    received, closed = [], []
    conn = protocol.Connection(protocol.Role.SERVER, TOKEN, nonce=server_nonce)
    ch = channel_mod.Channel(
        stream,
        conn,
        on_message=lambda c, segments: received.append([bytes(s) for s in segments]),
        on_closed=lambda c, reason: closed.append((c.close_kind, reason)),
        display="memory",
    )
    conn.start()
    ch._flush_handshake()
    for _ in range(len(chunks) + 2):  # one read per chunk, then the end of stream
        if ch.state is channel_mod.ChannelState.CLOSED:
            break
        ch.on_readable()
    return ch, stream, received, closed


MESSAGES = [[b"header-1", b"payload"], [b"h2"], [b"", b"x" * 300, b"y"]]
HELLO = frames.encode_bytes(frames.Kind.HELLO, [server_nonce(32)], versions.PROTOCOL_VERSION)


def expect_clean(ch, stream, received, closed, welcome):
    assert received == MESSAGES
    assert ch.authenticated and closed[0][0] is channel_mod.CloseKind.PEER_LEFT
    assert bytes(stream.written) == HELLO + welcome and stream.closed


def test_frames_split_at_every_byte():
    data, welcome = client_bytes(MESSAGES)
    for cut in range(1, len(data)):
        expect_clean(*run_server([data[:cut], data[cut:]]), welcome)


def test_one_byte_per_read():
    data, welcome = client_bytes(MESSAGES)
    expect_clean(*run_server([data[i : i + 1] for i in range(len(data))]), welcome)


def test_a_large_frame_split_around_its_header():
    big = [[b"h", b"z" * (200 * 1024)]]
    data, _ = client_bytes(big)
    start = len(data) - len(frames.encode_bytes(frames.Kind.MESSAGE, big[0]))
    for cut in (start - 1, start + 1, start + 20, start + 30, len(data) // 2, len(data) - 1):
        _, _, received, closed = run_server([data[:cut], data[cut:]])
        assert received == big and closed[0][0] is channel_mod.CloseKind.PEER_LEFT


def test_end_of_stream_inside_a_frame_is_a_protocol_error():
    data, welcome = client_bytes(MESSAGES)
    for cut in (len(data) - 1, len(data) - 150):
        ch, stream, received, closed = run_server([data[:cut]])
        kind, reason = closed[0]
        assert kind is channel_mod.CloseKind.PROTOCOL_ERROR and "middle of a frame" in reason
        assert bytes(stream.written).startswith(HELLO + welcome)
        assert len(stream.written) > len(HELLO + welcome)  # the last words: an ERROR frame


def test_a_stream_without_a_socket_cannot_be_registered():
    ch = channel_mod.Channel(
        MockStream([]),
        protocol.Connection(protocol.Role.SERVER, TOKEN),
        on_message=lambda c, s: None,
        on_closed=lambda c, r: None,
        display="memory",
    )
    with pytest.raises(TypeError, match="on_readable"):
        ch.start()
