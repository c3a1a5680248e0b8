"""The process node's WebSocket port-forward: the handshake key and the framing (pure)."""

import socket
import struct

from tests.cluster.process_node import portforward


def test_accept_key_is_rfc6455s():
    assert portforward.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_masked_client_frames_of_every_length_class_are_read():
    a, b = socket.socketpair()
    try:
        for payload in (b"\x00port", b"x" * 300, b"y" * 70000):
            mask = b"\x01\x02\x03\x04"
            masked = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
            n = len(payload)
            length = bytes([0x80 | n]) if n < 126 else (bytes([0x80 | 126]) + struct.pack("!H", n) if n < 65536 else bytes([0x80 | 127]) + struct.pack("!Q", n))
            a.sendall(bytes([0x82]) + length + mask + masked)
            assert portforward.read_frame(b) == (portforward.BINARY, payload)
    finally:
        a.close()
        b.close()


def test_server_frames_are_unmasked_with_the_right_length():
    assert portforward.frame(b"ab") == b"\x82\x02ab"
    assert portforward.frame(b"z" * 200)[:4] == b"\x82\x7e\x00\xc8"
