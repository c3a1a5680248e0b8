"""Reads parsed in place: what a connection must keep of a buffer its caller reuses.

Aspects: several frames in one read; a read ending inside a frame's header, lengths or body,
with the caller's buffer overwritten afterwards (as the channel's reused read buffer is); a
small frame and the start of a large one in the same read; a large out-of-band segment arriving
across many reads; a reused buffer at every split point of a two-frame stream.
"""

from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.wire import frames
from mesh_client._src.wire.protocol import NEED_DATA, Connection, Message, Role, State

TOKEN = b"s3cret-token"


def authenticated_server() -> Connection:
    conn = Connection(Role.SERVER, TOKEN)
    conn.state = State.AUTHENTICATED  # the handshake is tested in test_protocol
    return conn


def frame(*segments: bytes) -> bytes:
    return frames.encode_bytes(frames.Kind.MESSAGE, list(segments))


def feed_reused(conn: Connection, wire: bytes, cuts: list[int]) -> list[list[bytes]]:
    """Feed ``wire`` in pieces through one reused buffer, scribbling over it after each drain."""
    scratch = bytearray(len(wire) + 1)
    got: list[list[bytes]] = []
    start = 0
    for end in [*cuts, len(wire)]:
        n = end - start
        scratch[:n] = wire[start:end]
        view = memoryview(scratch)[:n]
        conn.receive_data(view)
        while (ev := conn.next_event()) is not NEED_DATA:
            assert isinstance(ev, Message)
            got.append([bytes(s) for s in ev.segments])
        scratch[:] = b"\xee" * len(scratch)  # the caller reuses its buffer for the next read
        start = end
    return got


def test_several_frames_in_one_read():
    conn = authenticated_server()
    wire = frame(b"a") + frame(b"bb", b"ccc") + frame(b"")
    assert feed_reused(conn, wire, []) == [[b"a"], [b"bb", b"ccc"], [b""]]


def test_every_split_of_two_frames_through_a_reused_buffer():
    first, second = frame(b"head", b"x" * 300), frame(b"second", b"", b"y" * 40)
    wire = first + second
    for cut in range(1, len(wire)):
        got = feed_reused(authenticated_server(), wire, [cut])
        assert got == [[b"head", b"x" * 300], [b"second", b"", b"y" * 40]], cut


def test_three_way_splits_inside_header_lengths_and_body():
    wire = frame(b"0123456789", b"abcdef") * 2
    header = frames.HEADER.size
    for cuts in ([3, header + 4], [header + 8, header + 17], [header + 20, len(wire) - 3]):
        got = feed_reused(authenticated_server(), wire, cuts)
        assert got == [[b"0123456789", b"abcdef"]] * 2, cuts


def test_a_small_frame_then_the_start_of_a_large_one_in_one_read():
    conn = authenticated_server()
    big = bytes(range(256)) * 512  # 128 KiB: above LARGE_FRAME, so it gets its own buffer
    wire = frame(b"small") + frame(b"h", big)
    stream = MockStream([wire[:5000], wire[5000:]])
    events = []
    while stream.pending:
        view = conn.receive_buffer()
        if view is not None:
            conn.buffer_filled(stream.read_into(view))
        else:
            conn.receive_data(stream.read(65536))
        while (ev := conn.next_event()) is not NEED_DATA:
            events.append([bytes(s) for s in ev.segments])
    assert events == [[b"small"], [b"h", big]]


def test_a_large_segment_across_many_reads_lands_in_one_buffer():
    conn = authenticated_server()
    big = bytes(range(256)) * 4096  # 1 MiB
    wire = frame(b"pickle", big) + frame(b"after")
    stream = MockStream([wire[i : i + 7001] for i in range(0, len(wire), 7001)])
    events = []
    reads_into_buffer = 0
    while stream.pending:
        view = conn.receive_buffer()
        if view is not None:
            conn.buffer_filled(stream.read_into(view))
            reads_into_buffer += 1
        else:
            conn.receive_data(stream.read(7001))
        while (ev := conn.next_event()) is not NEED_DATA:
            events.append(ev)
    assert [bytes(s) for s in events[0].segments] == [b"pickle", big]
    assert type(events[0].segments[1]) is bytes  # its own object, filled read by read (the sender's was bytes)
    assert [bytes(s) for s in events[1].segments] == [b"after"]
    assert reads_into_buffer > 100  # the body went straight into its buffer, read by read


def test_receive_data_twice_without_draining_keeps_both_in_order():
    conn = authenticated_server()
    wire = frame(b"one") + frame(b"two")
    conn.receive_data(wire[:10])
    conn.receive_data(wire[10:])
    got = []
    while (ev := conn.next_event()) is not NEED_DATA:
        got.append([bytes(s) for s in ev.segments])
    assert got == [[b"one"], [b"two"]]
