"""The per-message work in C (``_frames.c``) against its Python twins, input by input.

Aspects: the module is built and bound; taking the frames of a read gives the same messages and
stops at the same byte for any mix of frames (calls, replies, other shapes, other kinds, a bad
magic or version, too many segments, flagged or over-limit lengths, cut anywhere) and any
buffer type; decoding a request gives the same tuple, kept fields or not, and the same error
for a malformed one; packing a request or a reply gives the same bytes, or the same error for a
value out of range. (The other wire tests run on both paths too: conftest.py.)
"""

import pickle
import random
import struct

import pytest

from mesh_client._src.wire import envelopes, frames, packing, protocol
from mesh_client._src.wire.native import frames as native

built = pytest.mark.skipif(native is None, reason="not built (test_the_native_module_is_built says so)")

LIMIT = protocol.Connection.LARGE_FRAME - 1
MAX_SEGMENTS = protocol.Connection.MAX_SEGMENTS
FIELDS = envelopes.request_fields(("actor-0", "noop", 3, ("gpus",), (8,)))


def test_the_native_module_is_built(frames_path):
    # scripts/setup builds it (pyproject's ext-modules); without it the Python twins do the work.
    assert native is not None, "mesh_client._src.wire._frames is missing: run pip install -e . with a C compiler"
    if frames_path == "native":
        assert protocol._take is native.take
        assert envelopes.request_parts is native.request_parts
        assert (packing.request_frame, packing.reply_frame) == (native.request_frame, native.reply_frame)


def frame(kind=frames.Kind.MESSAGE, segments=(b"envelope", b"payload"), magic=b"PM", version=frames.VERSION, lengths=None):
    count = len(segments) if lengths is None else len(lengths)
    lengths = [len(s) for s in segments] if lengths is None else lengths
    return struct.pack(f"!2sBBHH{count}Q", magic, version, int(kind), count, 0, *lengths) + b"".join(segments)


def some_frame(rng):
    choice = rng.randrange(12)
    n = rng.choice([0, 1, 9, 100, LIMIT // 2, LIMIT])
    body = bytes(rng.randrange(256) for _ in range(min(n, 64))) * (n // 64 + 1)
    if choice < 4:  # a call or a reply: two segments
        return frame(segments=(body[: n // 3], body[n // 3 : n]))
    if choice == 4:
        return frame(segments=())
    if choice == 5:
        return frame(segments=(body[:n], b"x", b""))
    if choice == 6:
        return frame(segments=(body[: n + 1],))  # at or over the limit once n is LIMIT
    if choice == 7:
        return frame(kind=rng.choice([frames.Kind.ERROR, frames.Kind.HELLO, 9]), segments=(b"why",))
    if choice == 8:
        return frame(magic=b"XM") if rng.random() < 0.5 else frame(version=frames.VERSION + 1)
    if choice == 9:
        return frame(lengths=[3] * (MAX_SEGMENTS + rng.choice([0, 1])), segments=()) + b"abc" * 20
    if choice == 10:
        return frame(lengths=[frames.READ_ONLY | 5, 2], segments=(b"12345", b"67"))
    return frame(lengths=[2**64 - 1, 2**64 - 1], segments=(b"ab",))


def both(buf, pos, limit=LIMIT):
    return native.take(buf, pos, limit, MAX_SEGMENTS), protocol._take_py(buf, pos, limit, MAX_SEGMENTS)


@built
@pytest.mark.parametrize("seed", range(40))
def test_taking_frames_gives_what_python_gives(seed):
    rng = random.Random(seed)
    stream = b"".join(some_frame(rng) for _ in range(rng.randrange(1, 8)))
    cuts = sorted({0, len(stream), *(rng.randrange(len(stream) + 1) for _ in range(6))})
    for cut in cuts:
        for buf in (stream[:cut], bytearray(stream[:cut]), memoryview(stream)[:cut]):
            for pos in (0, min(cut, 3)):
                for limit in (LIMIT, 100, 0):
                    c, py = both(buf, pos, limit)
                    assert c == py, (seed, cut, pos, limit)
                    assert all(type(s) is bytes for m in c[0] for s in m)


@built
def test_taking_every_call_and_reply_of_a_read():
    calls = b"".join(b"".join(packing._request_frame_py(i, 1, FIELDS, [b"args"])) for i in range(50))
    got, pos = native.take(calls, 0, LIMIT, MAX_SEGMENTS)
    assert pos == len(calls) and len(got) == 50
    assert (got, pos) == protocol._take_py(calls, 0, LIMIT, MAX_SEGMENTS)


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:
        return type(exc), str(exc)


REQUESTS = [
    [envelopes.request_envelope(7, 1, FIELDS), b"args"],
    [envelopes.request_envelope(2**64 - 1, 65535, FIELDS)],
    [envelopes.request_envelope(7, 1, envelopes.request_fields(("x" * envelopes.FIELDS_KEPT_BYTES,))), b"a", b"b"],
    [bytearray(envelopes.request_envelope(8, 2, FIELDS)), b"args"],
    [memoryview(envelopes.request_envelope(9, 2, FIELDS))],
    (envelopes.request_envelope(7, 1, FIELDS), b"a tuple"),
    [envelopes.REQUEST_HEAD.pack(1, 1) + pickle.dumps(["a", "list"])],
    [envelopes.REQUEST_HEAD.pack(1, 1) + b"no pickle"],
    [envelopes.REQUEST_HEAD.pack(1, 1)],
    [b"\x00\x01"],
    [],
    [None],
    "not segments",
]


@built
@pytest.mark.parametrize("segments", REQUESTS, ids=range(len(REQUESTS)))
@pytest.mark.parametrize("kept", [False, True])
def test_decoding_a_request_gives_what_python_gives(segments, kept):
    envelopes._fields_seen.clear()
    if kept:  # the C twin's own case: fields decoded lately
        outcome(envelopes._request_parts_py, segments)
    c = outcome(native.request_parts, segments)
    py = outcome(envelopes._request_parts_py, segments)
    assert c == py
    assert type(c) is tuple and len(c) in (2, 4)


PAYLOADS = [[b"args"], [], [b""], [b"a", b"b"], [bytearray(b"ba")], [memoryview(b"mv")], (b"tuple",),
            [b"b" * frames.FLAGGED_FROM], [b"b" * (frames.FLAGGED_FROM - 1)], [None]]
IDS = [0, 1, 2**64 - 1, -1, 2**64, True, 1.5, "1"]


@built
@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("call_id", IDS, ids=range(len(IDS)))
def test_packing_gives_what_python_gives(payload, call_id):
    def joined(pieces):
        return pieces if type(pieces) is tuple else [bytes(p) for p in pieces]

    for value in (0, 1, 255, 256, 65535, 65536, -1):
        assert joined(outcome(native.reply_frame, call_id, value, payload)) == \
            joined(outcome(packing._reply_frame_py, call_id, value, payload))
        assert joined(outcome(native.request_frame, call_id, value, FIELDS, payload)) == \
            joined(outcome(packing._request_frame_py, call_id, value, FIELDS, payload))
    assert joined(outcome(native.request_frame, call_id, 1, bytearray(FIELDS), payload)) == \
        joined(outcome(packing._request_frame_py, call_id, 1, bytearray(FIELDS), payload))


@built
def test_packed_pieces_are_the_callers_segments():
    one = [b"result"]
    assert native.reply_frame(1, envelopes.OK, one)[1] is one[0]
    call = native.request_frame(1, 1, FIELDS, one)
    assert call[1] is FIELDS and call[2] is one[0]
