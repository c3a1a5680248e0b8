"""Requests and replies packed in one piece (wire/packing.py) against the two-step encoding.

Aspects: a request's frame is byte for byte what envelopes + frames make, for a payload of one
small segment (the fast path), none, several, and large or read-only buffers (the general
path); the same for replies, with and without payload; what the receiver decodes from a packed
frame is what was sent; the pieces are the caller's segments, not copies.
"""

import pytest

from mesh_client._src.wire import envelopes, frames, packing, protocol

FIELDS = envelopes.request_fields(("actor-0", "noop", 3, ("gpus",), (8,)))
BIG = b"b" * frames.FLAGGED_FROM  # large and read-only: its length carries the flag
PAYLOADS = [
    [b"args"],  # one small bytes segment: the fast path
    [],
    [b""],
    [b"stream", b"buffer"],
    [bytearray(b"small bytearray")],
    [memoryview(b"small view")],
    [b"stream", BIG],
    [BIG],
    [bytearray(BIG)],
    [memoryview(BIG)],
]


def joined(pieces):
    return b"".join(bytes(p) for p in pieces)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("call_id", [0, 1, 2**64 - 1])
def test_a_request_frame_is_what_the_two_steps_make(payload, call_id):
    two_steps = frames.encode(frames.Kind.MESSAGE, [envelopes.request_envelope(call_id, 7, FIELDS), *payload])
    assert joined(packing.request_frame(call_id, 7, FIELDS, payload)) == joined(two_steps)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("status", [envelopes.OK, envelopes.ERROR, 255])
def test_a_reply_frame_is_what_the_two_steps_make(payload, status):
    two_steps = frames.encode(frames.Kind.MESSAGE, envelopes.encode_reply(2**40 + 5, status, payload))
    assert joined(packing.reply_frame(2**40 + 5, status, payload)) == joined(two_steps)


def received(data):
    conn = protocol.Connection(protocol.Role.CLIENT, b"token")
    conn.state = protocol.State.AUTHENTICATED
    conn.receive_data(data)
    out = [[bytes(s) for s in m] for m in conn.take_messages()]
    while (event := conn.next_event()) is not protocol.NEED_DATA:
        out.append([bytes(s) for s in event.segments])
    return out


def test_packed_frames_decode_to_what_was_sent():
    stream = joined(packing.request_frame(42, 1, FIELDS, [b"args"])) + joined(packing.reply_frame(43, envelopes.ERROR, [b"why", BIG]))
    request_segments, reply_segments = received(stream)
    request = envelopes.decode_request(request_segments)
    assert (request.call_id, request.op, request.header, request.payload) == (42, 1, (42, 1, "actor-0", "noop", 3, ("gpus",), (8,)), [b"args"])
    assert envelopes.reply_head(reply_segments) == (43, envelopes.ERROR)
    assert reply_segments[1:] == [b"why", BIG]


def test_the_pieces_are_the_callers_segments():
    payload = [b"stream", memoryview(BIG)]
    pieces = packing.request_frame(1, 1, FIELDS, payload)
    assert pieces[1] is FIELDS and pieces[2] is payload[0] and pieces[3] is payload[1]
    one = [b"result"]
    assert packing.reply_frame(1, envelopes.OK, one)[1] is one[0]


def test_a_reply_head_of_a_malformed_envelope_is_refused():
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.reply_head([b"short"])
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.reply_head([])
