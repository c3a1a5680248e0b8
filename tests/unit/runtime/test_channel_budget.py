"""A server-side channel before and after authentication, over a real socket pair.

Aspects: until the handshake succeeds the channel reads through a 1 KiB buffer, and through the
64 KiB one only once authenticated; a peer that closes without sending a byte is told apart
(``bytes_received == 0``, ``PEER_LEFT``) from one that sent garbage (``PROTOCOL_ERROR``).
"""

import queue
import socket

from mesh_client._src.runtime import channel as channel_mod
from mesh_client._src.runtime import reactor, streams
from mesh_client._src.wire import protocol

TOKEN = b"t" * 32


def server_channel(loop):
    ours, theirs = socket.socketpair()
    closed = queue.Queue()
    authenticated = queue.Queue()
    conn = protocol.Connection(protocol.Role.SERVER, TOKEN)
    ch = channel_mod.Channel(
        streams.SocketStream(ours),
        conn,
        on_message=lambda c, segments: None,
        on_closed=lambda c, reason: closed.put((c.close_kind, c.bytes_received, reason)),
        display="peer",
        on_authenticated=authenticated.put,
        reactor=loop,
    )
    conn.start()
    ch._flush_handshake()
    ch.start()
    return ch, theirs, closed, authenticated


def test_the_read_buffer_is_small_until_authenticated():
    loop = reactor.Reactor("test-channel")
    ch, theirs, _, authenticated = server_channel(loop)
    assert len(ch._chunk) == channel_mod.HANDSHAKE_READ_CHUNK
    client = protocol.Connection(protocol.Role.CLIENT, TOKEN)
    client.start()
    theirs.settimeout(10)
    while client.state is not protocol.State.AUTHENTICATED:
        client.receive_data(theirs.recv(4096))
        while client.next_event() is not protocol.NEED_DATA:
            pass
        out = client.data_to_send()
        if out:
            theirs.sendall(out)
    assert authenticated.get(timeout=10) is ch
    assert len(ch._chunk) == channel_mod.READ_CHUNK
    theirs.close()


def test_a_connect_and_close_is_told_apart_from_garbage():
    loop = reactor.Reactor("test-channel")
    _, probe, closed, _ = server_channel(loop)
    probe.close()
    kind, received, _ = closed.get(timeout=10)
    assert (kind, received) == (channel_mod.CloseKind.PEER_LEFT, 0)

    _, attacker, closed, _ = server_channel(loop)
    attacker.sendall(b"GET / HTTP/1.1\r\n\r\n")
    kind, received, reason = closed.get(timeout=10)
    assert kind is channel_mod.CloseKind.PROTOCOL_ERROR and received > 0
    assert "bad frame magic" in reason
    attacker.close()
