"""The client's handshake driver over an in-memory stream (the one connect() and identify_proc use).

Aspects: the server's HELLO and WELCOME split at every byte still authenticate, and the client
writes exactly its AUTH; a wrong token is refused with the server's reason; a server that
closes during the handshake, or is not a procmesh server, is an error that says so.
"""

import pytest

from mesh_client._src.runtime import handshaking
from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.wire import errors, frames, protocol

TOKEN = b"handshake-token"


def nonce(fill):
    return lambda n: fill * n


def server_script(server_token=TOKEN):
    """What a server sends (HELLO, then its answer) and the AUTH it expects from our client."""
    server = protocol.Connection(protocol.Role.SERVER, server_token, nonce=nonce(b"s"))
    client = protocol.Connection(protocol.Role.CLIENT, TOKEN, nonce=nonce(b"c"))
    server.start()
    client.start()
    hello = server.data_to_send()
    client.receive_data(hello)
    client.next_event()
    auth = client.data_to_send()
    server.receive_data(auth)
    try:
        server.next_event()
    except errors.AuthenticationError:
        pass
    return hello + server.data_to_send(), auth


def fresh_client():
    conn = protocol.Connection(protocol.Role.CLIENT, TOKEN, nonce=nonce(b"c"))
    conn.start()
    return conn


def test_the_servers_frames_split_at_every_byte_authenticate():
    data, auth = server_script()
    for cut in range(1, len(data)):
        stream, conn = MockStream([data[:cut], data[cut:]]), fresh_client()
        handshaking.authenticate(stream, conn, "memory")
        assert conn.state is protocol.State.AUTHENTICATED
        assert bytes(stream.written) == auth


def test_a_wrong_token_is_refused_with_the_servers_reason():
    data, _ = server_script(server_token=b"another mesh")
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        handshaking.authenticate(MockStream([data]), fresh_client(), "memory")


def test_a_server_closing_during_the_handshake_is_an_error():
    data, _ = server_script()
    hello_only = data[: len(frames.encode_bytes(frames.Kind.HELLO, [b"s" * 32]))]
    with pytest.raises(errors.AuthenticationError, match="memory closed the connection during the handshake"):
        handshaking.authenticate(MockStream([hello_only]), fresh_client(), "memory")


def test_a_peer_that_is_not_a_proc_server_is_named_as_such():
    with pytest.raises(errors.ProtocolError, match="^memory: .*not a procmesh proc server"):  # which of many
        handshaking.authenticate(MockStream([b"HTTP/1.1 400 Bad Request\r\n\r\n"]), fresh_client(), "memory")


def test_identify_through_a_port_forward_waits_for_the_streams_own_bound():
    """A port-forward's first bytes come once the API server and the kubelet have opened it
    (ForwardedStream.handshake_timeout, 30 s): identify_proc with a 0.5 s timeout gave up after
    0.5 s ('did not finish within'), as channel.connect does not; it waits for the stream's
    bound, here to the peer's end 1 s in (a socketpair standing in for the relay)."""
    import socket
    import threading

    from mesh_client._src.kubernetes.forwarding import ForwardedStream
    from mesh_client._src.runtime import identifying, streams

    class Forwarded(streams.SocketStream):
        handshake_timeout = ForwardedStream.handshake_timeout

    ended = threading.Event()

    def opener(address, timeout):
        near, far = socket.socketpair()
        threading.Timer(1.0, lambda: (far.close(), ended.set())).start()  # the relay ends, having said nothing
        return Forwarded(near)

    with pytest.raises(Exception) as info:
        identifying.identify_proc(("10.0.0.7", 26600), TOKEN, timeout=0.5, opener=opener)
    assert not isinstance(info.value, TimeoutError), info.value
    assert ended.wait(30)
