"""Large ``bytes`` segments left in the sender's memory for a local receiver to read there.

Over an AF_UNIX link (:mod:`mesh_client._src.runtime.peermemory`) a frame's large segments
need not cross the socket. Each end, once authenticated, sends an OFFER: the address of a
probe in its memory and the probe's bytes. A receiver that reads the same bytes there answers
PULLING; from then on the sender may *lend* a large segment: its length field carries
:data:`~.frames.IN_PEER` and the frame holds its 8-byte address instead of its bytes. The
receiver reads it into a new ``bytes`` (one copy, where a socket makes two), hands the frame on
as if the bytes had come over the socket, and sends the addresses back in a RELEASE; the
sender keeps each lent object alive until then, or until the link closes.

Only immutable memory is lent: a ``bytes``, or a view of all of one (what
:mod:`.serialization` makes of a large ``bytes`` argument or result), so what the receiver reads
is what was sent, however late it reads. A frame with other large segments (a bytearray, an
array) goes through the socket whole, as before. This module is the framing's part only: the
sender's rewrite of a frame (:func:`lend`) and the three small frames' bodies.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from mesh_client._src.wire import errors, frames

#: Segments from this size are lent (those that are flagged read-only on the socket path).
LEND_FROM = frames.FLAGGED_FROM
#: The probe of an OFFER.
PROBE_BYTES = 32
ADDRESS = struct.Struct("!Q")
_OFFER = struct.Struct(f"!Q{PROBE_BYTES}s")

Pieces = list[bytes | bytearray | memoryview]
Lent = list[tuple[int, bytes]]  # (address, the object kept alive until the receiver releases it)


def lendable(piece: bytes | bytearray | memoryview) -> bytes | None:
    """The ``bytes`` object that IS ``piece``'s memory, all of it, if it is one and large."""
    if type(piece) is memoryview:
        obj = piece.obj
        if type(obj) is bytes and piece.nbytes == len(obj) and piece.nbytes >= LEND_FROM and piece.c_contiguous:
            return obj
        return None
    if type(piece) is bytes and len(piece) >= LEND_FROM:
        return piece
    return None


def lend(pieces: Pieces, address_of: Callable[[bytes], int]) -> tuple[Pieces, Lent] | None:
    """``pieces`` of one MESSAGE frame (:mod:`.packing`, :func:`.frames.encode`) with its large
    ``bytes`` segments replaced by their addresses, and what was lent; None if there is nothing
    to lend or the frame has another large segment (it goes through the socket whole).

    A frame's payload segments are its last pieces, one each; a piece is taken for a segment
    only if the length field at that place is its length."""
    lent: Lent = []
    places: list[int] = []
    other = 0  # bytes of the frame that stay on the wire after the header
    count = len(pieces)
    for j in range(1, count):
        p = pieces[j]
        obj = lendable(p)
        if obj is not None:
            lent.append((address_of(obj), obj))
            places.append(j)
        else:
            other += p.nbytes if type(p) is memoryview else len(p)
    if not lent:
        return None
    head = pieces[0]
    magic, version, kind, segments, _ = frames.HEADER.unpack_from(head)
    if kind != frames.Kind.MESSAGE or len(head) < frames.HEADER.size + 8 * segments:
        return None
    if other + len(head) + ADDRESS.size * len(lent) >= frames.FLAGGED_FROM:
        return None  # another large segment: the socket path
    rewritten = bytearray(head)
    out = list(pieces)
    for (address, obj), j in zip(lent, places, strict=True):
        at = frames.HEADER.size + 8 * (segments - (count - j))
        field = frames.LENGTH.unpack_from(rewritten, at)[0]
        if frames.split_field(field)[0] != len(obj):
            return None  # not a whole segment: the socket path
        frames.LENGTH.pack_into(rewritten, at, len(obj) | frames.IN_PEER)
        out[j] = ADDRESS.pack(address)
    out[0] = rewritten
    return out, lent


def offer_body(address: int, probe: bytes) -> bytes:
    return _OFFER.pack(address, probe)


def parse_offer(body: bytes) -> tuple[int, bytes]:
    """(address, probe) of an OFFER's body."""
    if len(body) != _OFFER.size:
        raise errors.ProtocolError(f"malformed OFFER: {len(body)} bytes, not {_OFFER.size}")
    address, probe = _OFFER.unpack(body)
    return int(address), bytes(probe)


def release_body(addresses: list[int]) -> bytes:
    return struct.pack(f"!{len(addresses)}Q", *addresses)


def parse_release(body: bytes) -> list[int]:
    """The addresses of a RELEASE's body."""
    if len(body) % 8:
        raise errors.ProtocolError(f"malformed RELEASE: {len(body)} bytes is not a whole number of addresses")
    found: tuple[Any, ...] = struct.unpack(f"!{len(body) // 8}Q", body)
    return [int(a) for a in found]
