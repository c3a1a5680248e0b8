"""Held frames (coalescing): the outbox's bounds and order, and a channel over a real socket pair.

Aspects: the outbox keeps frames in order in one buffer, holds only small frames, says when it is
full, and puts unwritten bytes back in front; a channel writes held frames in one write, behind
them any frame not held, and all of them when a thread is about to wait (``flush_all``); a held
frame goes out by the reactor's timer with nobody sending or waiting after it; the receiver
parses a batch whole, split at every byte, or in any two pieces; closing on an error drops held
frames and refuses later sends, closing locally writes them first; a flush that must not block
never waits for the send lock, and what it left is written once the lock is free.
"""

import socket
import threading
import time

import pytest

from mesh_client._src.runtime import channel as channel_mod
from mesh_client._src.runtime import coalescing, streams
from mesh_client._src.wire import frames, protocol

TOKEN = b"coalescing-token"


def authenticated(role):
    conn = protocol.Connection(role, TOKEN)
    conn.state = protocol.State.AUTHENTICATED
    return conn


def frame(i, size=8):
    return frames.encode(frames.Kind.MESSAGE, [b"%08d" % i, b"x" * size])


def parse(data, cut=None):
    """The messages in ``data`` as a receiver parses them, fed whole or in pieces at ``cut``."""
    conn = authenticated(protocol.Role.SERVER)
    pieces = [data] if cut is None else [data[:cut], data[cut:]]
    out = []
    for piece in pieces:
        conn.receive_data(bytes(piece))
        out.extend([bytes(s) for s in m] for m in conn.take_messages())
        while True:
            event = conn.next_event()
            if event is protocol.NEED_DATA:
                break
            out.append([bytes(s) for s in event.segments])
    return out


@pytest.fixture
def slow_timer(monkeypatch):
    """The reactor's timer out of the way, so what a test sees is only what it made happen."""
    monkeypatch.setattr(coalescing, "HOLD_SECONDS", 600.0)


@pytest.fixture
def pair():
    """A client channel (not registered with the reactor) and the raw socket of its peer."""
    ours, theirs = socket.socketpair()
    closed = []
    ch = channel_mod.Channel(
        streams.SocketStream(ours), authenticated(protocol.Role.CLIENT),
        on_message=lambda c, m: None, on_closed=lambda c, reason: closed.append((c.close_kind, reason)),
        display="pair",
    )
    ch._sock = ours  # as start() sets it, for the non-blocking writes of the reactor's timer
    yield ch, theirs, closed
    theirs.close()  # first: a close that writes held frames to a full socket fails at once instead of blocking
    ch.close("test over")


def received(sock, at_least, timeout=30.0):
    """Bytes from ``sock`` until ``at_least`` arrived (bounded by ``timeout``)."""
    sock.settimeout(timeout)
    data = b""
    while len(data) < at_least:
        chunk = sock.recv(1 << 20)
        assert chunk, "the peer closed before the bytes came"
        data += chunk
    return data


def nothing_waiting(sock):
    sock.settimeout(0)
    try:
        sock.recv(1 << 16)
    except BlockingIOError:
        return True
    return False


def size(pieces):
    return sum(len(p) for p in pieces)


# The outbox ---------------------------------------------------------------------------------


def test_the_outbox_keeps_frames_in_order_and_says_when_a_batch_begins():
    box = coalescing.Outbox()
    assert not box
    assert box.hold(frame(0)) == coalescing.BEGAN
    assert box.hold(frame(1)) == coalescing.HELD
    assert box.frames == 2
    data = box.take()
    assert not box and box.frames == 0
    assert parse(data) == [[b"%08d" % i, b"x" * 8] for i in range(2)]
    assert box.hold(frame(2)) == coalescing.BEGAN  # emptied: the next frame begins a new batch


def test_only_small_frames_are_held_and_a_refused_one_leaves_the_batch_as_it_was():
    box = coalescing.Outbox()
    box.hold(frame(0))
    before = bytes(box._data)
    assert box.hold(frame(1, coalescing.Outbox.MAX_FRAME)) == coalescing.REFUSED
    view = memoryview(bytearray(coalescing.Outbox.MAX_FRAME + 1))
    assert box.hold([b"head", view]) == coalescing.REFUSED
    assert bytes(box._data) == before and box.frames == 1
    assert box.hold(frame(2, coalescing.Outbox.MAX_FRAME - 100)) == coalescing.HELD


def test_the_outbox_is_full_at_its_frame_or_byte_bound():
    box = coalescing.Outbox()
    for i in range(coalescing.Outbox.MAX_FRAMES - 1):
        assert box.hold(frame(i)) in (coalescing.BEGAN, coalescing.HELD)
    assert box.hold(frame(0)) == coalescing.FULL
    box = coalescing.Outbox()
    big = coalescing.Outbox.MAX_FRAME - 100
    while len(box) + size(frame(0, big)) < coalescing.Outbox.MAX_BYTES:
        assert box.hold(frame(0, big)) in (coalescing.BEGAN, coalescing.HELD)
    assert box.hold(frame(0, big)) == coalescing.FULL


def test_unwritten_bytes_go_back_in_front_of_later_frames():
    box = coalescing.Outbox()
    box.hold(frame(0))
    box.hold(frame(1))
    data = box.take()
    box.hold(frame(2))
    box.put_back(data[10:])  # the first 10 bytes went out
    assert parse(data[:10] + box.take()) == [[b"%08d" % i, b"x" * 8] for i in range(3)]


def test_a_batch_parses_whole_split_at_every_byte_and_cut_anywhere():
    box = coalescing.Outbox()
    for i in range(20):
        box.hold(frame(i, size=i * 7))
    data = bytes(box.take())
    want = [[b"%08d" % i, b"x" * (i * 7)] for i in range(20)]
    assert parse(data) == want
    for cut in range(1, len(data)):
        assert parse(data, cut) == want, cut
    conn = authenticated(protocol.Role.SERVER)
    got = []
    for i in range(len(data)):  # one byte per read
        conn.receive_data(data[i : i + 1])
        got.extend([bytes(s) for s in m] for m in conn.take_messages())
        while (event := conn.next_event()) is not protocol.NEED_DATA:
            got.append([bytes(s) for s in event.segments])
    assert got == want


# A channel ----------------------------------------------------------------------------------


def test_held_frames_go_out_together_and_in_order_behind_which_a_direct_frame_follows(pair, slow_timer):
    ch, theirs, _ = pair
    ch.send([b"%08d" % 0, b"x" * 8])  # not held: written at once
    assert parse(received(theirs, size(frame(0)))) == [[b"%08d" % 0, b"x" * 8]]
    for i in range(1, 4):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    assert nothing_waiting(theirs)
    ch.send([b"%08d" % 4, b"x" * 8])  # behind the held ones, in the same write
    got = parse(received(theirs, 4 * size(frame(0))))
    assert got == [[b"%08d" % i, b"x" * 8] for i in range(1, 5)]


def test_a_thread_about_to_wait_writes_every_held_frame(pair, slow_timer):
    ch, theirs, _ = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    assert nothing_waiting(theirs) and ch in coalescing._holding
    coalescing.flush_all()
    assert parse(received(theirs, 3 * size(frame(0)))) == [[b"%08d" % i, b"x" * 8] for i in range(3)]
    assert ch not in coalescing._holding


def test_a_held_frame_goes_out_with_nobody_sending_or_waiting_after_it(pair):
    ch, theirs, _ = pair
    ch.send([b"%08d" % 7, b"x" * 8], hold=True)
    assert parse(received(theirs, size(frame(7)))) == [[b"%08d" % 7, b"x" * 8]]  # the reactor's timer


def test_a_full_outbox_is_written_by_the_sender(pair, slow_timer):
    ch, theirs, _ = pair
    n = coalescing.Outbox.MAX_FRAMES
    for i in range(n - 1):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    assert nothing_waiting(theirs)
    ch.send([b"%08d" % (n - 1), b"x" * 8], hold=True)
    assert not ch._outbox
    assert parse(received(theirs, n * size(frame(0)))) == [[b"%08d" % i, b"x" * 8] for i in range(n)]


def test_a_large_frame_is_never_held_and_goes_out_behind_the_held_ones(pair):
    ch, theirs, _ = pair
    ch.send([b"%08d" % 0, b"x" * 8], hold=True)
    big = bytearray(b"y" * (coalescing.Outbox.MAX_FRAME + 1))
    ch.send([b"%08d" % 1, big], hold=True)
    got = parse(received(theirs, size(frame(0)) + size(frames.encode(frames.Kind.MESSAGE, [b"%08d" % 1, big]))))
    assert got == [[b"%08d" % 0, b"x" * 8], [b"%08d" % 1, bytes(big)]]


def test_a_held_frame_is_a_copy(pair, slow_timer):
    ch, theirs, _ = pair
    payload = bytearray(b"before!!")
    ch.send([b"%08d" % 0, payload], hold=True)
    payload[:] = b"changed!"  # the sender may reuse its buffer once send returns
    ch.flush()
    assert parse(received(theirs, size(frame(0)))) == [[b"%08d" % 0, b"before!!"]]


def test_a_broken_connection_drops_held_frames_and_refuses_later_sends(pair, slow_timer):
    ch, theirs, closed = pair
    ch.send([b"%08d" % 0, b"x" * 8], hold=True)
    ch.close("the peer went away", channel_mod.CloseKind.PEER_LEFT)
    theirs.settimeout(30)
    assert theirs.recv(1 << 16) == b""  # the end of the stream, and nothing before it: dropped
    assert not ch._outbox and ch not in coalescing._holding
    assert closed == [(channel_mod.CloseKind.PEER_LEFT, "the peer went away")]
    with pytest.raises(channel_mod.ChannelClosed, match="the peer went away"):
        ch.send([b"%08d" % 1, b"x" * 8], hold=True)
    assert not ch._outbox


def test_closing_locally_writes_held_frames_first(pair, slow_timer):
    ch, theirs, _ = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    ch.close("done here")
    got = parse(received(theirs, 3 * size(frame(0))))
    assert got == [[b"%08d" % i, b"x" * 8] for i in range(3)]


def test_a_peer_that_reads_nothing_never_blocks_the_reactor_and_gets_the_frames_when_it_reads(pair, slow_timer):
    ch, theirs, _ = pair
    filler = 0
    try:
        while True:  # fill the socket, as a peer that stopped reading would
            filler += ch._sock.send(b"f" * 65536, socket.MSG_DONTWAIT)
    except BlockingIOError:
        pass
    for i in range(5):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    ch.flush(block=False)  # what the reactor and waiting threads do: returns at once
    assert len(ch._outbox) == 5 * size(frame(0)) and ch in coalescing._holding
    data = received(theirs, filler + 5 * size(frame(0)))  # reading makes room: the reactor retries
    assert data[:filler] == b"f" * filler
    assert parse(data[filler:]) == [[b"%08d" % i, b"x" * 8] for i in range(5)]


def test_the_reactor_never_waits_for_the_send_lock_and_the_held_frames_still_go_out(pair, slow_timer):
    # The lock's holder may be stuck writing to a peer that does not read: the reactor's (and a
    # waiting thread's) flush must not queue behind it, and must not lose the held frames.
    ch, theirs, _ = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    flushed = threading.Event()
    with ch._send_lock:  # as a writer stuck on its sendmsg holds it
        flusher = threading.Thread(target=lambda: (ch.flush(block=False), flushed.set()), daemon=True)
        flusher.start()
        assert flushed.wait(30), "flush(block=False) waited for the send lock"
    data = received(theirs, 3 * size(frame(0)))  # the retry, once the lock is free
    assert parse(data) == [[b"%08d" % i, b"x" * 8] for i in range(3)]


def test_a_thread_bursts_from_its_second_send_until_it_waits():
    import threading

    def sends():
        return [coalescing.sending() for _ in range(3)]

    coalescing.waiting()
    assert sends() == [False, True, True]
    coalescing.waiting()
    assert sends() == [False, True, True]
    other = []
    t = threading.Thread(target=lambda: other.extend(sends()))
    t.start()
    t.join()
    assert other == [False, True, True]  # each thread its own
    assert coalescing.sending() is True  # this one is still bursting


def test_a_forked_child_never_writes_what_its_parent_held(pair, slow_timer):
    import os

    ch, theirs, _ = pair
    ch.send([b"%08d" % 0, b"x" * 8], hold=True)
    pid = os.fork()
    if pid == 0:  # the child: a wait there must not write the parent's frame on the shared socket
        code = 0
        try:
            coalescing.waiting()
            code = 3 if coalescing._holding else 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert nothing_waiting(theirs)  # the child wrote nothing
    ch.flush()
    assert parse(received(theirs, size(frame(0)))) == [[b"%08d" % 0, b"x" * 8]]  # once, by the parent


def test_the_frame_count_is_nonzero_exactly_while_bytes_are_held():
    # The channel tests outbox.frames, not len(outbox), on its hot path: the two must agree.
    box = coalescing.Outbox()
    steps = [lambda: box.hold(frame(0)), lambda: box.hold(frame(1, coalescing.Outbox.MAX_FRAME)),
             lambda: box.take(), lambda: box.hold(frame(1, coalescing.Outbox.MAX_FRAME)),
             lambda: box.put_back(bytearray(b"rest")), lambda: box.hold(frame(2)),
             lambda: box.take(), lambda: box.put_back(bytearray())]
    for step in steps:
        step()
        assert bool(box.frames) == bool(len(box))


def test_a_stuck_writer_costs_the_reactor_few_wakeups_however_many_threads_flush(pair, slow_timer, monkeypatch):
    """While a writer holds the send lock (stuck on a peer that does not read), each flush that
    finds it busy used to start a chain of tries every millisecond that lasted until the lock
    was free: 50 waiting threads, 50,000 reactor wake-ups a second. One try is pending at a
    time now, after a doubling delay."""
    ch, theirs, _ = pair
    ch.send([b"%08d" % 0, b"x" * 8], hold=True)
    tries = []
    original = channel_mod.Channel.flush
    monkeypatch.setattr(channel_mod.Channel, "flush",
                        lambda self, block=True: (tries.append(block), original(self, block))[1])
    with ch._send_lock:  # as a writer stuck on its sendmsg holds it
        for _ in range(50):  # threads about to wait, each flushing without blocking
            ch.flush(block=False)
        time.sleep(0.5)
        timer_tries = len(tries) - 50
    assert timer_tries <= 20  # doubling from 1 ms to 50 ms: about 12 in 0.5 s (was 500 per chain)
    data = received(theirs, size(frame(0)))  # the next try, once the lock is free
    assert parse(data) == [[b"%08d" % 0, b"x" * 8]]
