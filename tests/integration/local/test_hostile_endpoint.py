"""A client facing an endpoint that is not a proc server it can trust (a squatted address, a
hostile or broken service): its handshake is bounded as a whole, not read by read.

Aspects: an endpoint that trickles its HELLO, one byte at a time and each just within the
timeout of a read, is given up on within the client's timeout, before the endpoint gets to
the end of that frame, by a direct connection and by IDENTIFY (a relink's probe), with a
TimeoutError naming the address and the handshake.
"""

import socket
import threading
import time

import pytest

from mesh_client._src.runtime import channel, identifying
from mesh_client._src.wire import frames, versions

TIMEOUT = 1.0
TRICKLE = 0.2  # between bytes: well within a read's timeout, so only a bound on the whole ends it


class Trickler:
    """Listens on loopback; sends its one client a valid HELLO, one byte per TRICKLE seconds."""

    def __init__(self) -> None:
        self.hello = frames.encode_bytes(frames.Kind.HELLO, [b"n" * 32], versions.PROTOCOL_VERSION)
        self.sent = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                for byte in self.hello:
                    conn.sendall(bytes([byte]))
                    self.sent += 1
                    time.sleep(TRICKLE)
            except OSError:  # the client gave up
                pass

    def close(self) -> None:
        self.listener.close()
        self._thread.join(len(self.hello) * TRICKLE + 5)


def _connect(address):
    return channel.connect(address, b"token", on_message=lambda *a: None, on_closed=lambda *a: None, timeout=TIMEOUT)


def _identify(address):
    return identifying.identify_proc(address, b"token", timeout=TIMEOUT)


@pytest.mark.parametrize("client", [_connect, _identify], ids=["connect", "identify"])
def test_a_trickled_handshake_is_given_up_within_the_timeout(client):
    trickler = Trickler()
    try:
        with pytest.raises(TimeoutError, match=rf"handshake with 127\.0\.0\.1:{trickler.address[1]} did not finish within 1 s"):
            client(trickler.address)
        # Given up while the endpoint was still in its first frame, not after the whole of it.
        assert 0 < trickler.sent < len(trickler.hello)
    finally:
        trickler.close()
