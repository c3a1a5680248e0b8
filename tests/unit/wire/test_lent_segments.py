"""Large ``bytes`` segments lent over AF_UNIX (wire/pulled.py), the framing's part: no sockets.

Aspects: the sender's rewrite of request and reply frames (the length flagged IN_PEER, the
address in place of the bytes, the object kept), and what it leaves alone (small frames, a
bytearray, a view of part of a bytes, a frame with another large segment); the receiver reading
lent segments through the pull it was given, at any split of the frame across reads, and noting
their addresses for the RELEASE; what it refuses (lent segments it never accepted, a flag on a
lent length, a lent frame large on the wire, a real size over the limit, a pull the kernel
refused) and a peer gone before its segment was read; OFFER, PULLING and RELEASE as events,
only after authentication, and malformed ones refused.
"""

import errno

import pytest

from mesh_client._src.wire import errors, frames, packing, pulled, serialization
from mesh_client._src.wire.protocol import (
    NEED_DATA,
    Connection,
    Message,
    Offered,
    Pulling,
    Released,
    Role,
)
from tests.unit.wire.test_large_frames import MIB, TOKEN
from tests.unit.wire.test_large_frames import authenticated_server as authenticated


class Memory:
    """A peer's memory as addresses of bytes objects, and the reads made of it."""

    def __init__(self) -> None:
        self.objects: dict[int, bytes] = {}
        self.reads: list[tuple[int, int]] = []

    def address_of(self, data: bytes) -> int:
        address = 0x1000 * (len(self.objects) + 1)
        self.objects[address] = data
        return address

    def pull(self, address: int, size: int) -> bytes:
        self.reads.append((address, size))
        data = self.objects.get(address)
        if data is None or len(data) != size:
            raise OSError(errno.EFAULT, "Bad address")
        return bytes(bytearray(data))  # a new object, as the kernel's read makes


def joined(pieces: list) -> bytes:
    return b"".join(bytes(p) for p in pieces)


def events(conn: Connection, wire: bytes, splits: list[int] = ()) -> list:
    points = sorted({p for p in splits if 0 < p < len(wire)})
    out = []
    for a, b in zip([0, *points], [*points, len(wire)]):
        conn.receive_data(wire[a:b])
        while (ev := conn.next_event()) is not NEED_DATA:
            out.append(ev)
    return out


def big(seed: int, n: int = MIB) -> bytes:
    return bytes((i * 13 + seed) % 251 for i in range(256)) * (n // 256)


def test_a_reply_with_a_large_bytes_result_is_lent_and_arrives_whole():
    memory = Memory()
    result = big(1)
    payload = serialization.dumps(result)
    pieces = packing.reply_frame(7, 0, payload)
    lent = pulled.lend(pieces, memory.address_of)
    assert lent is not None
    out, kept = lent
    assert kept == [(0x1000, result)] and kept[0][1] is result  # the object itself, kept alive
    assert len(joined(out)) < 200  # the megabyte stays with the sender
    receiver = authenticated()
    receiver.allow_pulls(memory.pull)
    (message,) = events(receiver, joined(out))
    assert isinstance(message, Message)
    assert [bytes(s) for s in message.segments[1:]] == [bytes(p) for p in payload]
    assert type(message.segments[-1]) is bytes
    assert receiver.released == [0x1000] and memory.reads == [(0x1000, MIB)]


def test_a_request_with_several_large_bytes_arguments_is_lent_at_every_split():
    memory = Memory()
    a, b = big(2), big(3, 256 * 1024)
    payload = serialization.dumps(((a, "small", b), {}))
    assert len(payload) == 3
    pieces = packing.request_frame(2**64 - 1, 5, b"fields", payload)
    out, kept = pulled.lend(pieces, memory.address_of)
    assert [obj for _, obj in kept] == [a, b]
    wire = joined(out)
    for splits in ([1], [7], [9], [len(wire) - 9], [len(wire) - 1], list(range(1, len(wire)))):
        receiver = authenticated()
        receiver.allow_pulls(memory.pull)
        (message,) = events(receiver, wire, splits)
        assert serialization.loads(message.segments[1:]) == ((a, "small", b), {})
        assert receiver.released == [0x1000, 0x2000]


def test_only_whole_large_bytes_are_lent():
    memory = Memory()
    small = packing.reply_frame(1, 0, serialization.dumps(b"x" * 100))
    assert pulled.lend(small, memory.address_of) is None
    array = packing.reply_frame(1, 0, serialization.dumps(bytearray(MIB)))  # mutable after send
    assert pulled.lend(array, memory.address_of) is None
    data = big(4)
    part = packing.reply_frame(1, 0, [b"stream", memoryview(data)[1:]])  # a view of part of a bytes
    assert pulled.lend(part, memory.address_of) is None
    mixed = packing.reply_frame(1, 0, serialization.dumps((data, bytearray(MIB))))  # another large one
    assert pulled.lend(mixed, memory.address_of) is None
    assert memory.objects == {} or all(v is data for v in memory.objects.values())


def lent_wire(memory: Memory, data: bytes) -> bytes:
    out, _ = pulled.lend(packing.reply_frame(3, 0, serialization.dumps(data)), memory.address_of)
    return joined(out)


def test_lent_segments_are_refused_where_never_accepted():
    wire = lent_wire(Memory(), big(5))
    with pytest.raises(errors.ProtocolError, match="never accepted"):
        events(authenticated(), wire)


def test_a_lent_length_with_the_read_only_flag_is_refused():
    memory = Memory()
    wire = bytearray(lent_wire(memory, big(6)))
    at = frames.HEADER.size + 16  # the buffer's length (after the envelope's and the stream's)
    field = frames.LENGTH.unpack_from(wire, at)[0]
    frames.LENGTH.pack_into(wire, at, field | frames.READ_ONLY)
    receiver = authenticated()
    receiver.allow_pulls(memory.pull)
    with pytest.raises(errors.ProtocolError, match="read-only"):
        events(receiver, bytes(wire))


def test_a_lent_frame_that_is_large_on_the_wire_is_refused():
    wire = bytearray(frames.encode_bytes(frames.Kind.MESSAGE, [b"e" * frames.FLAGGED_FROM, b"12345678"]))
    at = frames.HEADER.size + 8
    frames.LENGTH.pack_into(wire, at, MIB | frames.IN_PEER)
    receiver = authenticated()
    receiver.allow_pulls(Memory().pull)
    with pytest.raises(errors.ProtocolError, match="carries"):
        events(receiver, bytes(wire))


def test_the_size_limit_counts_what_is_lent():
    memory = Memory()
    wire = lent_wire(memory, big(7))
    receiver = authenticated(max_message_bytes=MIB // 2)
    receiver.allow_pulls(memory.pull)
    with pytest.raises(errors.FrameTooLarge):
        events(receiver, wire)
    assert memory.reads == []  # refused before anything was read


def test_a_pull_the_kernel_refuses_is_a_protocol_error_and_a_gone_peer_a_reset():
    memory = Memory()
    wire = lent_wire(memory, big(8))
    receiver = authenticated()
    receiver.allow_pulls(lambda address, size: memory.pull(address + 1, size))  # not what was lent
    with pytest.raises(errors.ProtocolError, match="could not read"):
        events(receiver, wire)

    def gone(address: int, size: int) -> bytes:
        raise OSError(errno.ESRCH, "No such process")

    receiver = authenticated()
    receiver.allow_pulls(gone)
    with pytest.raises(ConnectionResetError):
        events(receiver, wire)


def test_offer_pulling_and_release_are_events_after_authentication():
    receiver = authenticated()
    probe = bytes(range(pulled.PROBE_BYTES))
    wire = (
        frames.encode_bytes(frames.Kind.OFFER, [pulled.offer_body(0xABCDEF, probe)])
        + frames.encode_bytes(frames.Kind.PULLING, [b""])
        + frames.encode_bytes(frames.Kind.RELEASE, [pulled.release_body([1, 2**64 - 1])])
    )
    assert events(receiver, wire, list(range(1, len(wire)))) == [
        Offered(0xABCDEF, probe), Pulling(), Released([1, 2**64 - 1])]


@pytest.mark.parametrize("kind", [frames.Kind.OFFER, frames.Kind.PULLING, frames.Kind.RELEASE])
def test_before_authentication_none_of_them_is_accepted(kind):
    server = Connection(Role.SERVER, TOKEN)
    server.start()
    server.data_to_send()
    with pytest.raises(errors.ProtocolError, match="unexpected"):
        events(server, frames.encode_bytes(kind, [b""]))


@pytest.mark.parametrize("frame", [
    frames.encode_bytes(frames.Kind.OFFER, [b"short"]),
    frames.encode_bytes(frames.Kind.RELEASE, [b"123"]),
    frames.encode_bytes(frames.Kind.RELEASE, [b"12345678", b"12345678"]),
])
def test_malformed_ones_are_refused(frame):
    with pytest.raises(errors.ProtocolError, match="malformed|exactly one"):
        events(authenticated(), frame)


def test_allow_pulls_needs_authentication():
    with pytest.raises(errors.ProtocolError):
        Connection(Role.CLIENT, TOKEN).allow_pulls(Memory().pull)
