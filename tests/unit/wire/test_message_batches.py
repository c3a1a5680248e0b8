"""Every small message of one read in one call (Connection.take_messages), beside next_event.

Aspects: several frames in one read come out in order; a stream split at every byte gives the
same messages; the batch stops at a large frame, an ERROR frame or an unfinished frame and
next_event takes over from exactly there; a frame over the size limit is refused by next_event
(the batch leaves it); before authentication nothing is taken; ``idle`` is true only when
nothing received is left.
"""

import pytest

from mesh_client._src.wire import errors, frames, protocol

TOKEN = b"batch-token"


def authenticated(max_message_bytes=protocol.DEFAULT_MAX_MESSAGE_BYTES):
    conn = protocol.Connection(protocol.Role.SERVER, TOKEN, max_message_bytes=max_message_bytes)
    conn.state = protocol.State.AUTHENTICATED
    return conn


def message(*segments):
    return frames.encode_bytes(frames.Kind.MESSAGE, list(segments))


def drain(conn):
    """Everything the connection yields now: batches first, then next_event, as the channel does."""
    out = []
    while True:
        out.extend([bytes(s) for s in m] for m in conn.take_messages())
        if conn.idle():
            return out
        event = conn.next_event()
        if event is protocol.NEED_DATA:
            return out
        if isinstance(event, protocol.Message):
            out.append([bytes(s) for s in event.segments])
        else:
            out.append(event)
            return out


MESSAGES = [[b"envelope-1", b"payload"], [b"e2"], [b"e3", b"", b"three"]]
STREAM = b"".join(message(*m) for m in MESSAGES)


def test_several_frames_in_one_read_come_out_in_order():
    conn = authenticated()
    conn.receive_data(bytearray(STREAM))
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == MESSAGES
    assert conn.idle()


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_split_at_every_byte_gives_the_same_messages(cut):
    conn = authenticated()
    got = []
    for part in (STREAM[:cut], STREAM[cut:]):
        buffer = bytearray(part)  # reused by the reader after each read, as the channel's is
        conn.receive_data(buffer)
        got += drain(conn)
        buffer[:] = b"\xff" * len(buffer)
    assert got == MESSAGES


def test_the_batch_stops_at_a_large_frame_and_next_event_takes_it():
    big = b"x" * protocol.Connection.LARGE_FRAME
    conn = authenticated()
    conn.receive_data(message(b"before") + message(b"big", big) + message(b"after"))
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == [[b"before"]]
    assert not conn.idle()
    assert drain(conn) == [[b"big", big], [b"after"]]


def test_the_batch_stops_at_an_error_frame():
    conn = authenticated()
    conn.receive_data(message(b"one") + frames.encode_bytes(frames.Kind.ERROR, [b"going away"]) + message(b"never"))
    got = drain(conn)
    assert got[0] == [b"one"]
    assert isinstance(got[1], protocol.Closed) and got[1].reason == "going away"


def test_a_frame_over_the_limit_is_left_to_next_event_which_refuses_it():
    conn = authenticated(max_message_bytes=100)
    conn.receive_data(message(b"ok") + message(b"y" * 101))
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == [[b"ok"]]
    with pytest.raises(errors.FrameTooLarge):
        conn.next_event()


def test_nothing_is_taken_before_authentication():
    conn = protocol.Connection(protocol.Role.SERVER, TOKEN)
    conn.start()
    conn.receive_data(message(b"too early"))
    assert conn.take_messages() == []
    with pytest.raises(errors.ProtocolError):
        conn.next_event()


def test_idle_only_when_nothing_is_left():
    conn = authenticated()
    assert conn.idle()
    conn.receive_data(STREAM[:5])
    assert conn.take_messages() == [] and not conn.idle()
    conn.receive_data(STREAM[5:])
    assert drain(conn) == MESSAGES and conn.idle()
    conn.receive_data(b"")
    assert not conn.idle()  # the end of stream is for next_event to report
    assert isinstance(conn.next_event(), protocol.Closed)


def test_a_two_segment_frame_over_the_limit_is_left_to_next_event():
    # Each segment is under the limit, the two together are not (the batch's two-segment path).
    conn = authenticated(max_message_bytes=100)
    conn.receive_data(message(b"e", b"p") + message(b"x" * 60, b"y" * 60))
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == [[b"e", b"p"]]
    with pytest.raises(errors.FrameTooLarge):
        conn.next_event()


def test_a_two_segment_frame_with_a_bad_magic_is_left_to_next_event():
    bad = b"XX" + message(b"e", b"p")[2:]
    conn = authenticated()
    conn.receive_data(message(b"one", b"two") + bad)
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == [[b"one", b"two"]]
    with pytest.raises(errors.ProtocolError, match="magic"):
        conn.next_event()


def test_two_segment_frames_of_many_shapes_parse_and_the_shapes_kept_stay_bounded():
    conn = authenticated()
    sent = [[b"e" * (i % 50), b"p" * i] for i in range(protocol.PAIRS_KEPT + 200)]
    conn.receive_data(b"".join(message(*m) for m in sent))
    assert [[bytes(s) for s in m] for m in conn.take_messages()] == sent
    assert len(protocol._pairs) <= protocol.PAIRS_KEPT
