"""Large frames: every large segment is received straight into an object of its own.

Aspects: a 1 MiB segment split at many points across reads (in the header, the lengths, the
small segments, the body, one byte per read around the boundaries); several large segments in
one message, with small ones between them; read-only segments (a sender's ``bytes``) arriving as
``bytes`` and the others as ``bytearray``; each frame's objects are new (a second payload does
not change the first); the flag only on large read-only segments; sizes checked before anything
is allocated, flags included, and never a large frame before authentication; a frame cut short;
a frame within the limit that cannot be allocated fails as a bad frame, a later segment when its
bytes come; a header costs one buffer, however many it announces.
"""

import pytest

from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.wire import errors, frames, receiving
from mesh_client._src.wire.protocol import NEED_DATA, Connection, Message, Role, State

TOKEN = b"s3cret-token"
MIB = 1 << 20


def authenticated_server(**kwargs: int) -> Connection:
    conn = Connection(Role.SERVER, TOKEN, **kwargs)
    conn.state = State.AUTHENTICATED  # the handshake is tested in test_protocol
    return conn


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(256)) * (n // 256) + bytes(n % 256)


def receive(conn: Connection, chunks: list[bytes], chunk_read: int = 65536) -> list[list[bytes | bytearray | memoryview]]:
    """Drive ``conn`` as the channel does: small reads through receive_data, large frames into
    receive_buffer(); returns the segments of every message."""
    stream = MockStream(chunks)
    got: list[list[bytes | bytearray | memoryview]] = []
    while stream.pending:
        view = conn.receive_buffer()
        if view is not None:
            conn.buffer_filled(stream.read_into(view))
        else:
            conn.receive_data(stream.read(chunk_read))
        while (ev := conn.next_event()) is not NEED_DATA:
            assert isinstance(ev, Message)
            got.append(ev.segments)
    return got


def cut(wire: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p for p in points if 0 < p < len(wire)})
    return [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)])]


def test_a_1mib_segment_split_at_many_points_arrives_whole_in_its_own_bytes():
    big = pattern(MIB, 1)
    wire = frames.encode_bytes(frames.Kind.MESSAGE, [b"envelope", b"pickle-stream", big])
    head = frames.HEADER.size + 3 * frames.LENGTH.size
    body = head + len(b"envelope") + len(b"pickle-stream")
    splits = [
        [1], [frames.HEADER.size - 1], [frames.HEADER.size + 3], [head - 1], [head], [head + 4],
        [body - 1], [body], [body + 1], [len(wire) - 1], [body + 12345, body + 500_000],
        list(range(body - 3, body + 4)),  # one byte per read around the start of the big segment
        list(range(0, len(wire), 7001)), list(range(0, len(wire), 65536)),
    ]
    for points in splits:
        for chunk_read in (65536, 100):
            [segments] = receive(authenticated_server(), cut(wire, points), chunk_read)
            assert [bytes(s) for s in segments] == [b"envelope", b"pickle-stream", big], (points, chunk_read)
            assert type(segments[2]) is bytes  # the sender's bytes: received into a bytes object


def test_several_large_segments_with_small_ones_between():
    parts = [b"env", pattern(MIB, 2), b"small-1", b"small-2", bytearray(pattern(300_000, 3)),
             pattern(65536, 4), b"", memoryview(bytearray(pattern(70_000, 5))), b"tail"]
    wire = frames.encode_bytes(frames.Kind.MESSAGE, parts) + frames.encode_bytes(frames.Kind.MESSAGE, [b"next"])
    expected = [bytes(p) for p in parts]
    boundaries = []
    at = frames.HEADER.size + len(parts) * frames.LENGTH.size
    for p in parts:
        at += len(p)
        boundaries += [at - 1, at, at + 1]
    for points in ([], boundaries, list(range(0, len(wire), 4099))):
        first, second = receive(authenticated_server(), cut(wire, points))
        assert [bytes(s) for s in first] == expected
        assert [type(s) for s in first[1:6]] == [bytes, memoryview, memoryview, bytearray, bytes]
        assert type(first[7]) is bytearray  # a writable view's bytes: writable at the receiver too
        assert [bytes(s) for s in second] == [b"next"]


def test_each_frame_gets_new_objects_a_second_payload_leaves_the_first_unchanged():
    one, two = bytearray(pattern(MIB, 6)), bytearray(pattern(MIB, 7))
    conn = authenticated_server()
    [first] = receive(conn, [frames.encode_bytes(frames.Kind.MESSAGE, [b"h", one])])
    kept = first[1]
    [second] = receive(conn, [frames.encode_bytes(frames.Kind.MESSAGE, [b"h", two])])
    assert second[1] is not kept
    assert kept == one and second[1] == two


def test_only_large_read_only_segments_carry_the_flag():
    fields = frames.head_struct(6).unpack(frames.encode(frames.Kind.MESSAGE, [
        b"x" * 100, b"y" * 65536, bytearray(70_000), memoryview(b"z" * 70_000), memoryview(bytearray(70_000)),
        memoryview(b"w" * 100),
    ])[0])[5:]
    assert [frames.split_field(f) for f in fields] == [
        (100, False), (65536, True), (70_000, False), (70_000, True), (70_000, False), (100, False),
    ]


def test_sizes_are_checked_with_the_flag_masked_before_any_allocation():
    limit = 2 * MIB
    conn = authenticated_server(max_message_bytes=limit)
    fits = frames.encode_bytes(frames.Kind.MESSAGE, [b"h", pattern(MIB, 8)])
    [[_, got]] = receive(conn, [fits])
    assert got == pattern(MIB, 8)
    # A header alone, as a peer would send it before the body: refused from the header.
    too_big = frames.head_struct(2).pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, 2, 0, 1, limit | frames.READ_ONLY)
    conn.receive_data(too_big)
    with pytest.raises(errors.FrameTooLarge, match=f"exceeds the limit of {limit} bytes"):
        conn.next_event()
    assert conn.receive_buffer() is None  # nothing was set up for it


@pytest.mark.parametrize("length", [70_000, 70_000 | frames.READ_ONLY, 512 | frames.READ_ONLY])
def test_no_large_frame_before_authentication(length):
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    server.data_to_send()
    header = frames.head_struct(1).pack(frames.MAGIC, frames.VERSION, frames.Kind.AUTH, 1, 0, length)
    server.receive_data(header)
    with pytest.raises(errors.FrameTooLarge, match="limit of 1024 bytes"):
        server.next_event()
    assert server.receive_buffer() is None


def test_a_frame_cut_short_in_a_large_segment_is_a_protocol_error():
    wire = frames.encode_bytes(frames.Kind.MESSAGE, [b"h", pattern(MIB, 9)])
    conn = authenticated_server()
    receive(conn, [wire[:300_000]])
    conn.buffer_filled(0)  # end of stream
    with pytest.raises(errors.ProtocolError, match="in the middle of a frame"):
        conn.next_event()


def test_receive_objects_are_not_zeroed_but_fully_written():
    """The allocator hands out uninitialised memory; the frame never exposes a byte it did not fill."""
    assert receiving.copy_free()  # CPython: the ctypes allocators are there
    for read_only in (True, False):
        target, view = receiving.allocate(1000, read_only)
        assert type(target) is (bytes if read_only else bytearray) and len(target) == 1000
        view[:] = b"\x5a" * 1000
        del view
        assert target == b"\x5a" * 1000


def test_a_completed_large_frame_not_yet_taken_then_more_bytes_keeps_the_order():
    conn = authenticated_server()
    big = pattern(MIB, 10)
    wire = frames.encode_bytes(frames.Kind.MESSAGE, [b"h", big])
    conn.receive_data(wire[:65536])
    assert conn.next_event() is NEED_DATA
    view = conn.receive_buffer()
    view[:] = wire[65536:]
    conn.buffer_filled(view.nbytes)
    assert conn.receive_buffer() is None  # complete: nothing more to read into it
    conn.receive_data(frames.encode_bytes(frames.Kind.MESSAGE, [b"after"]))
    first, second = conn.next_event(), conn.next_event()
    assert isinstance(first, Message) and bytes(first.segments[1]) == big
    assert isinstance(second, Message) and [bytes(s) for s in second.segments] == [b"after"]


def test_a_frame_within_the_limit_but_beyond_memory_is_a_protocol_error():
    # 2**61 bytes fit the limit but no address space: the allocation fails, the connection
    # must fail as for any bad frame (the channel closes it), not with a MemoryError.
    conn = authenticated_server(max_message_bytes=2**62)
    head = frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, 1, 0) + frames.LENGTH.pack(2**61)
    conn.receive_data(head + b"x" * 16)
    with pytest.raises(errors.FrameTooLarge, match="cannot allocate"):
        conn.next_event()


def test_a_header_costs_one_buffer_however_much_it_announces():
    """4096 segments of 4 MiB (16 GiB, the default limit) announced by a 32 KiB header: the
    buffers are allocated as their bytes arrive, not all up front (a peer sending headers alone
    made the proc reserve 16 GiB per connection)."""
    import tracemalloc

    fields = [4 * MIB] * 4096
    header = frames.head_struct(len(fields)).pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, len(fields), 0, *fields)
    conn = authenticated_server()
    tracemalloc.start()
    try:
        conn.receive_data(header)
        assert conn.next_event() is NEED_DATA
        assert conn.receive_buffer().nbytes == 4 * MIB  # the first segment's, and only that
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert allocated < 8 * MIB, allocated


def test_a_later_segment_beyond_memory_is_a_protocol_error_when_its_bytes_come():
    conn = authenticated_server(max_message_bytes=2**62)
    head = frames.head_struct(2).pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, 2, 0, MIB, 2**61)
    conn.receive_data(head)
    assert conn.next_event() is NEED_DATA
    view = conn.receive_buffer()
    view[:] = pattern(MIB, 11)
    with pytest.raises(errors.FrameTooLarge, match="cannot allocate"):
        conn.buffer_filled(view.nbytes)
