"""Frame layout of the proc-server wire: a fixed header, segment lengths, then segments.

Every frame is ``MAGIC (2) | version (1) | kind (1) | segment count (2) | field (2)``,
followed by one unsigned 64-bit big-endian length per segment and the segments themselves.
A length's top bit (:data:`READ_ONLY`, set only on segments of at least :data:`FLAGGED_FROM`
bytes) says the sender's buffer was read-only (a pickled ``bytes``): the receiver reads that
segment into a ``bytes`` object (:mod:`.receiving`), anything else large into a ``bytearray``.
``version`` is the framing's; ``field`` carries, in handshake frames, the sender's protocol
version (:mod:`.versions`; releases before it sent 0 and ignore it), and is 0 elsewhere.
Segments carry what the layer above puts there (a pickled header, a pickled payload, raw
out-of-band buffers); this module only counts bytes. It is used by :mod:`.protocol`.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence

from mesh_client._src.wire import errors

MAGIC = b"PM"
VERSION = 1
HEADER = struct.Struct("!2sBBHH")
LENGTH = struct.Struct("!Q")
READ_ONLY = 1 << 63  # in a length field: the segment was a read-only buffer
FLAGGED_FROM = 64 * 1024  # smaller segments never carry the flag (small frames stay plain)


class Kind(enum.IntEnum):
    """Frame kinds. The first four belong to the handshake and never carry pickles."""

    HELLO = 1  # server -> client: 32-byte nonce
    AUTH = 2  # client -> server: 32-byte nonce + 32-byte MAC
    WELCOME = 3  # server -> client: 32-byte MAC proving the server holds the token too
    REJECT = 4  # either way: a UTF-8 reason, then the sender closes
    MESSAGE = 5  # after authentication: segments for the runtime
    ERROR = 6  # after authentication: a UTF-8 reason, then the sender closes


_HEADS: dict[int, struct.Struct] = {}


def head_struct(count: int) -> struct.Struct:
    """The fixed header and ``count`` lengths as one struct (cached: frames have few shapes)."""
    st = _HEADS.get(count)
    if st is None:
        st = _HEADS[count] = struct.Struct(f"!2sBBHH{count}Q")
    return st


def encode(kind: Kind | int, segments: Sequence[bytes | bytearray | memoryview], field: int = 0) -> list[bytes | bytearray | memoryview]:
    """Return the pieces of one frame, ready for ``socket.sendmsg`` (segments are not copied)."""
    count = len(segments)
    st = _HEADS.get(count) or head_struct(count)  # runs for every message: no calls it can skip
    # A small bytes segment (every segment of a call or reply without large buffers) is its own
    # length. A loop, not a comprehension: its frame cost more than the rest of this function.
    lengths = []
    for s in segments:
        if type(s) is bytes:
            n = len(s)
            lengths.append(n if n < FLAGGED_FROM else _field(s))
        else:
            lengths.append(_field(s))
    return [st.pack(MAGIC, VERSION, kind, count, field, *lengths), *segments]


def encode_bytes(kind: Kind, segments: Sequence[bytes | bytearray | memoryview], field: int = 0) -> bytes:
    """One frame as a single bytes object (for small frames and tests)."""
    return b"".join(bytes(p) for p in encode(kind, segments, field))


def _field(segment: bytes | bytearray | memoryview) -> int:
    """The segment's length field: its size, and :data:`READ_ONLY` for a large read-only one."""
    if type(segment) is memoryview:
        n = segment.nbytes
        return n | READ_ONLY if n >= FLAGGED_FROM and segment.readonly else n
    n = len(segment)
    return n | READ_ONLY if n >= FLAGGED_FROM and type(segment) is bytes else n


def split_field(field: int) -> tuple[int, bool]:
    """A length field as (size in bytes, whether the segment was read-only)."""
    return field & (READ_ONLY - 1), bool(field & READ_ONLY)


def header_field(data: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """The header's 16-bit field at ``offset`` (a handshake frame's protocol version)."""
    return int(HEADER.unpack_from(data, offset)[4])


def parse_header(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Kind, int]:
    """Check the fixed header at ``offset`` and return (kind, segment count)."""
    magic, version, kind, count, _ = HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        raise errors.ProtocolError(f"bad frame magic {bytes(magic)!r}: the peer is not a procmesh proc server or client")
    if version != VERSION:
        raise errors.ProtocolError(f"wire version {version} is not supported (this side speaks {VERSION}); use the same procmesh version on both ends")
    try:
        return Kind(kind), count
    except ValueError:
        raise errors.ProtocolError(f"unknown frame kind {kind}") from None
