"""SocketStream.write: one sendmsg for a whole frame, and the rest however the socket takes it.

Aspects: a frame of several pieces (bytes, bytearray, a multi-byte-format view) sent by one
call; a socket that accepts only a few bytes per call (partial sends at every offset, inside
and between pieces); more pieces than one sendmsg may carry; over a real socket pair; a unix
stream's larger send buffer, TCP's Nagle off, TCP keepalive on.
"""

import array
import socket

import pytest

from mesh_client._src.runtime import streams
from mesh_client._src.runtime.streams import _MAX_IOV, SocketStream


class StingySocket:
    """A socket whose sendmsg takes at most ``per_call`` bytes (as a full send buffer would)."""

    family = socket.AF_UNIX

    def __init__(self, per_call: int) -> None:
        self.per_call = per_call
        self.received = bytearray()
        self.calls = 0

    def setsockopt(self, *option) -> None:
        pass  # SocketStream sizes a unix socket's send buffer

    def sendmsg(self, pieces):
        self.calls += 1
        room = self.per_call
        for p in pieces:
            data = memoryview(p).cast("B")
            take = min(room, data.nbytes)
            self.received += data[:take]
            room -= take
            if room == 0:
                break
        return self.per_call - room


PIECES = [b"header-bytes", bytearray(b"body" * 10), memoryview(array.array("d", [1.5, -2.0, 3.25])), b"", b"tail"]
EXPECTED = b"".join(bytes(memoryview(p).cast("B")) for p in PIECES)


def test_a_frame_goes_out_in_one_sendmsg():
    sock = StingySocket(10_000)
    SocketStream(sock).write(PIECES)  # type: ignore[arg-type]
    assert sock.calls == 1 and bytes(sock.received) == EXPECTED


@pytest.mark.parametrize("per_call", [1, 3, 7, 12, 13, 50, len(EXPECTED) - 1])
def test_partial_sends_resume_where_the_socket_stopped(per_call):
    sock = StingySocket(per_call)
    SocketStream(sock).write(PIECES)  # type: ignore[arg-type]
    assert bytes(sock.received) == EXPECTED


def test_more_pieces_than_one_sendmsg_carries():
    pieces = [bytes([i % 256]) * 3 for i in range(_MAX_IOV * 2 + 5)]
    sock = StingySocket(10**9)
    SocketStream(sock).write(pieces)  # type: ignore[arg-type]
    assert bytes(sock.received) == b"".join(pieces)


def test_over_a_real_socket_pair():
    a, b = socket.socketpair()
    try:
        big = bytes(range(256)) * 4096  # 1 MiB: more than the socket buffer, read while it is written
        import threading

        got = bytearray()

        def reader() -> None:
            while len(got) < len(big) + 5:
                chunk = b.recv(1 << 16)
                if not chunk:
                    return
                got.extend(chunk)

        t = threading.Thread(target=reader)
        t.start()
        SocketStream(a).write([b"head-", memoryview(big)])
        t.join(timeout=30)
        assert bytes(got) == b"head-" + big
    finally:
        a.close()
        b.close()


def test_a_unix_stream_gets_the_larger_send_buffer_and_tcp_keeps_nagle_off():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        streams.SocketStream(a)
        with open("/proc/sys/net/core/wmem_max") as f:  # the kernel caps the request here
            cap = int(f.read())
        # Linux reports twice what it grants (the doubling covers its bookkeeping).
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * min(streams.UNIX_SEND_BUFFER, cap)
    finally:
        a.close()
        b.close()
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname())
        streams.SocketStream(client)
        assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        client.close()
    finally:
        listener.close()


def test_a_tcp_link_is_kept_alive_on_both_ends():
    """TCP keepalive on the client's and the proc's end of a link (a peer gone from the network
    without a FIN ends the link; tests/e2e: test_a_call_to_a_proc_cut_off_the_network_...)."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname())
        served, _ = listener.accept()
        for sock in (client, served):
            streams.SocketStream(sock)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == streams.KEEPALIVE_IDLE_SECONDS
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == streams.KEEPALIVE_INTERVAL_SECONDS
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == streams.KEEPALIVE_PROBES
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 90_000  # idle + 4 x 15 s
            sock.close()
    finally:
        listener.close()


def test_how_much_of_a_frame_went_out_is_known_after_a_write():
    """What a Ctrl-C right after a write asks (streams.unsent): with the native send (_sends.c),
    a whole frame of bytes is known to have gone out; a frame with other pieces, or a stand-in
    socket, is not known (the channel then breaks the link, as it must)."""
    from mesh_client._src.runtime import _sends

    assert streams._send is _sends.send  # built with the package (the C compiler is there)
    a, b = socket.socketpair()
    try:
        stream = SocketStream(a)
        pieces = [b"head", b"-", b"payload"]
        stream.write(pieces)
        assert stream.written == 12 and streams.unsent(stream, pieces) == []
        assert b.recv(64) == b"head-payload"
        stream.write([b"x", memoryview(b"yz")])  # not all bytes: socket.sendmsg's count is lost to a Ctrl-C
        assert stream.written == 3  # known once it returned
        box = [-1]
        assert _sends.send(a.fileno(), [b"x", bytearray(b"y")], box) is NotImplemented and box == [-1]
        with pytest.raises(ValueError, match="what went out before this call"):
            _sends.send(a.fileno(), [b"abc"], box)  # -1: not a count to add to
        box = [0]
        assert _sends.send(a.fileno(), [b"abc"], box) == 3 and box == [3]
        assert _sends.send(a.fileno(), [b"de"], box) == 2 and box == [5]  # added: a frame's running count
        assert streams.unsent(StingySocket(1), pieces) is None  # nothing known of a stand-in
    finally:
        a.close()
        b.close()


def test_a_write_of_what_the_socket_takes_now_keeps_its_running_count():
    """A thread's flush of held frames (never blocking): as many sends as the socket takes, the
    running total in ``written`` throughout; a full socket ends it without waiting."""
    a, b = socket.socketpair()
    try:
        stream = SocketStream(a)
        data = bytearray(b"held" * 10)
        assert stream.write_available(data) == 40 and stream.written == 40
        assert b.recv(64) == bytes(data)
        big = bytearray(range(256)) * 65536  # 16 MiB: more than the socket buffer takes
        sent = stream.write_available(big)
        assert 0 < sent < len(big) and stream.written == sent  # stopped at the full socket, not blocked
        got = bytearray()
        b.settimeout(10)
        while len(got) < sent:
            got += b.recv(1 << 20)
        assert got == big[:sent]
    finally:
        a.close()
        b.close()


def test_the_part_of_a_frame_not_sent_is_what_follows_the_count():
    class Known:
        written = 6

    assert [bytes(v) for v in streams.unsent(Known(), [b"head", b"-", b"payload"])] == [b"ayload"]


def test_a_socket_with_a_timeout_is_written_by_python_which_waits_for_room():
    """A handshake's socket has a timeout (a non-blocking descriptor): the native write would
    take a full buffer for a stall; socket.sendmsg waits for room instead."""
    import threading
    import time

    a, b = socket.socketpair()
    try:
        stream = SocketStream(a)
        a.setblocking(False)
        filled = 0
        try:
            while True:  # the buffer full before the write begins
                filled += a.send(b"f" * 4096)
        except BlockingIOError:
            pass
        a.settimeout(30)
        got = bytearray()

        def drain():
            time.sleep(0.2)  # the write has begun, on a full buffer
            while len(got) < filled + 5:
                got.extend(b.recv(1 << 16))

        reader = threading.Thread(target=drain)
        reader.start()
        stream.write([b"hello"])  # the native write would take the full buffer for a stall
        reader.join(30)
        assert bytes(got[-5:]) == b"hello"
    finally:
        a.close()
        b.close()
