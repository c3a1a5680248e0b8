"""Request and reply envelopes (protocol 2): a fixed struct, then (requests only) the fields.

Aspects: a request and a reply round-trip; fields encoded once serve any call id; the receiver
keeps small decoded fields (equal bytes give the one tuple) but not large ones, and never more
than FIELDS_KEPT; a reply envelope is exactly 9 bytes and anything else is malformed; a request
whose fields are not a pickled tuple is malformed, and so is a message without segments.
"""

import pickle

import pytest

from mesh_client._src.wire import envelopes


def test_a_request_round_trips_with_its_payload():
    segments = envelopes.encode_request(42, (1, "actor", "noop", 3, ("gpus",), (8,)), [b"args"])
    request = envelopes.decode_request([bytes(s) for s in segments])
    assert (request.call_id, request.op) == (42, 1)
    assert request.header == (42, 1, "actor", "noop", 3, ("gpus",), (8,))
    assert request.payload == [b"args"]


def test_fields_encoded_once_serve_every_call_id():
    fields = envelopes.request_fields(("actor", "noop", 0, ("gpus",), (8,)))
    first = envelopes.decode_request([envelopes.request_envelope(1, 1, fields)])
    second = envelopes.decode_request([envelopes.request_envelope(2**63, 1, fields)])
    assert (first.call_id, second.call_id) == (1, 2**63)
    assert first.header[2:] == second.header[2:] == ("actor", "noop", 0, ("gpus",), (8,))


def test_small_fields_are_kept_and_large_ones_are_not():
    envelopes._fields_seen.clear()
    small = envelopes.request_fields(("actor", "noop", 1, ("gpus",), (8,)))
    envelopes.decode_request([envelopes.request_envelope(1, 1, small)])
    assert envelopes._fields_seen[small] == ("actor", "noop", 1, ("gpus",), (8,))
    large = envelopes.request_fields(("actor", "x" * envelopes.FIELDS_KEPT_BYTES))
    envelopes.decode_request([envelopes.request_envelope(2, 2, large)])
    assert large not in envelopes._fields_seen


def test_the_kept_fields_are_bounded():
    envelopes._fields_seen.clear()
    for i in range(envelopes.FIELDS_KEPT * 2 + 5):
        envelopes.decode_request([envelopes.request_envelope(i, 1, envelopes.request_fields(("a", i)))])
        assert len(envelopes._fields_seen) <= envelopes.FIELDS_KEPT


def test_a_reply_round_trips_and_is_nine_bytes():
    segments = envelopes.encode_reply(7, envelopes.ERROR, [b"failure"])
    assert len(segments[0]) == 9
    reply = envelopes.decode_reply([bytes(s) for s in segments])
    assert (reply.call_id, reply.status, reply.payload) == (7, envelopes.ERROR, [b"failure"])
    assert envelopes.reply_status(segments) == envelopes.ERROR


@pytest.mark.parametrize("envelope", [b"", b"12345678", b"this is no pickle", pickle.dumps((1, 0))])
def test_a_reply_envelope_of_another_length_is_malformed(envelope):
    with pytest.raises(envelopes.MalformedMessage, match="9 bytes"):
        envelopes.decode_reply([envelope])


@pytest.mark.parametrize("fields", [pickle.dumps(["a", "list"]), b"no pickle", b""])
def test_request_fields_that_are_not_a_pickled_tuple_are_malformed(fields):
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.decode_request([envelopes.REQUEST_HEAD.pack(1, 1) + fields])


def test_a_request_envelope_shorter_than_its_struct_is_malformed():
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.decode_request([b"\x00\x01"])


def test_a_message_without_segments_is_malformed():
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.decode_request([])
    with pytest.raises(envelopes.MalformedMessage):
        envelopes.decode_reply([])
