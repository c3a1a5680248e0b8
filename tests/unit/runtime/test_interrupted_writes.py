"""A Ctrl-C in a thread that writes a frame (a notebook's main thread), over a real socket pair.

Aspects: a Ctrl-C that lands as a write starts (before any byte went out) leaves the link whole
and the frame goes out, whatever the connection's previous write left as its count (unknown, or
larger than this frame); held frames, written with a direct frame, by a thread's flush or by a
thread about to wait (never blocking), go through the write whose count survives a Ctrl-C (the
native one), so a Ctrl-C right after it is no reason to break the link either; a second Ctrl-C
(a storm's) before what a cut-short or stalled write left unsent is back in the outbox cuts the
link (those frames are nowhere else), one after held frames went out (or were put back) does not.
"""

import socket
import threading

import pytest

from mesh_client._src.runtime import channel as channel_mod
from mesh_client._src.runtime import coalescing, streams
from mesh_client._src.wire import frames, protocol

TOKEN = b"interrupted-writes"


def authenticated(role):
    conn = protocol.Connection(role, TOKEN)
    conn.state = protocol.State.AUTHENTICATED
    return conn


def encoded(i, size=8):
    return b"".join(bytes(p) for p in frames.encode(frames.Kind.MESSAGE, [b"%08d" % i, b"x" * size]))


def parse(data):
    conn = authenticated(protocol.Role.SERVER)
    conn.receive_data(bytes(data))
    out = [[bytes(s) for s in m] for m in conn.take_messages()]
    while (event := conn.next_event()) is not protocol.NEED_DATA:
        out.append([bytes(s) for s in event.segments])
    return out


def received(sock, at_least, timeout=30.0):
    sock.settimeout(timeout)
    data = b""
    while len(data) < at_least:
        chunk = sock.recv(1 << 20)
        assert chunk, "the peer closed before the bytes came"
        data += chunk
    return data


@pytest.fixture
def pair(monkeypatch):
    monkeypatch.setattr(coalescing, "HOLD_SECONDS", 600.0)  # held frames go only when a test sends
    ours, theirs = socket.socketpair()
    closed = []
    ch = channel_mod.Channel(
        streams.SocketStream(ours), authenticated(protocol.Role.CLIENT),
        on_message=lambda c, m: None, on_closed=lambda c, reason: closed.append(reason), display="pair",
    )
    ch._sock = ours  # as start() sets it: the reactor writes what a stalled write left
    yield ch, theirs, closed
    theirs.close()
    ch.close("test over")


def interrupt_next_write(ch, monkeypatch):
    """The next write of ``ch`` is cut by a Ctrl-C that lands as it starts, before any byte."""
    write = ch.stream.write

    def cut(pieces):
        monkeypatch.setattr(ch.stream, "write", write)
        raise KeyboardInterrupt

    monkeypatch.setattr(ch.stream, "write", cut)


@pytest.mark.parametrize("before", ["count unknown", "count larger"])
def test_a_ctrl_c_as_a_write_starts_keeps_the_link_and_the_frame(pair, monkeypatch, before):
    ch, theirs, closed = pair
    first = encoded(0, size=1024 if before == "count unknown" else 4096)
    # The previous write: one of more pieces than one sendmsg carries (its count is not kept),
    # or a native one of a frame larger than the next.
    ch.stream.write([first[i:i + 1] for i in range(len(first))] if before == "count unknown" else [first])
    assert ch.stream.written == (-1 if before == "count unknown" else len(first))
    interrupt_next_write(ch, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        ch.send([b"%08d" % 1, b"x" * 8])
    assert closed == [] and ch.state is channel_mod._ACTIVE  # nothing went out: no reason to break the link
    got = parse(received(theirs, len(first) + len(encoded(1))))  # the frame follows, whole (the reactor)
    assert got[1:] == [[b"%08d" % 1, b"x" * 8]]


class CtrlCAfterSend:
    """A socket with a Ctrl-C landing in this (the test's) thread right after socket.sendmsg or
    socket.send returned (Python raises it in place of the result: the count is lost)."""

    def __init__(self, sock):
        self._sock = sock
        self._thread = threading.get_ident()

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def _interrupt(self):
        if threading.get_ident() == self._thread:  # never the reactor's thread
            raise KeyboardInterrupt

    def sendmsg(self, pieces):
        sent = self._sock.sendmsg(pieces)
        self._interrupt()
        return sent

    def send(self, data, flags=0):
        sent = self._sock.send(data, flags)
        self._interrupt()
        return sent


def ctrl_c_after_every_send(ch, monkeypatch):
    """Each write of ``ch`` is followed by a Ctrl-C, as its send returns: the native one keeps
    its count (stored before it returns), socket.sendmsg's is lost."""
    native = ch.stream._send

    def send_then_ctrl_c(fd, pieces, box, flags=0):
        sent = native(fd, pieces, box, flags)
        if sent is NotImplemented:
            return sent
        raise KeyboardInterrupt

    monkeypatch.setattr(ch.stream, "_send", send_then_ctrl_c)
    monkeypatch.setattr(ch.stream, "sock", CtrlCAfterSend(ch.stream.sock))
    ch._sock = CtrlCAfterSend(ch._sock)  # the socket of writes that never block


@pytest.mark.parametrize("by", ["a direct frame", "a flush", "a waiting thread's flush"])
def test_held_frames_written_by_a_thread_that_gets_a_ctrl_c_keep_the_link(pair, monkeypatch, by):
    ch, theirs, closed = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    ctrl_c_after_every_send(ch, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        if by == "a direct frame":
            ch.send([b"%08d" % 3, b"x" * 8])  # behind the held ones, in the same write
        elif by == "a flush":
            ch.flush()  # written by this thread, blocking
        else:
            coalescing.flush_all()  # a thread about to wait writes what the socket takes now
    count = 4 if by == "a direct frame" else 3
    assert closed == []  # the write's count was known: all of it went out
    got = parse(received(theirs, count * len(encoded(0))))
    assert got == [[b"%08d" % i, b"x" * 8] for i in range(count)]


class SecondCtrlC:
    """A second Ctrl-C of a storm, landing as the channel starts to keep what the first one's
    write left unsent (the main thread descheduled there on a loaded machine): ``method`` of the
    channel raises KeyboardInterrupt the first time it is called."""

    def __init__(self, ch, monkeypatch, method):
        original = getattr(ch, method)

        def interrupted(*args):
            monkeypatch.setattr(ch, method, original)
            raise KeyboardInterrupt

        monkeypatch.setattr(ch, method, interrupted)


def cut_before_every_send(ch, monkeypatch, by):
    """Each write of ``ch`` ends before any byte went out (its count known: 0): a Ctrl-C, or
    ``BlockingIOError``, the send timeout of a peer that reads nothing passing (Stalled)."""

    def cut(fd, pieces, box, flags=0):
        raise BlockingIOError if by == "stalled" else KeyboardInterrupt

    monkeypatch.setattr(ch.stream, "_send", cut)


@pytest.mark.parametrize("by", ["a direct frame", "a direct frame, stalled", "a flush", "a waiting thread's flush"])
def test_a_ctrl_c_as_the_unsent_rest_is_kept_cuts_the_link(pair, monkeypatch, by):
    """Held frames taken for a write that a Ctrl-C (or a stall) cut short, and a Ctrl-C (of a
    storm) before what did not go out was put back: they are in no outbox and not on the wire,
    so their callers would wait for ever unless the link is cut (their calls then fail, a live
    proc is reached again)."""
    ch, theirs, closed = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    cut_before_every_send(ch, monkeypatch, "stalled" if by.endswith("stalled") else "ctrl-c")
    SecondCtrlC(ch, monkeypatch, "_put_back_unwritten" if by == "a waiting thread's flush" else "_stall")
    with pytest.raises(KeyboardInterrupt):
        if by.startswith("a direct frame"):
            ch.send([b"%08d" % 3, b"x" * 8])
        elif by == "a flush":
            ch.flush()
        else:
            coalescing.flush_all()
    assert ch.state is channel_mod._CLOSED and ch._outbox.frames == 0, (closed, ch._outbox.frames)
    assert "interrupted part way" in ch.close_reason


class CtrlCAsReleased:
    """The channel's send lock, with a Ctrl-C landing in the test's thread right after it is
    released (the write before it done: nothing of it is left to lose)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._thread = threading.get_ident()
        self.armed = False

    def acquire(self, blocking=True):
        return self._lock.acquire(blocking)

    def release(self):
        self._lock.release()
        if self.armed and threading.get_ident() == self._thread:
            self.armed = False
            raise KeyboardInterrupt

    def __enter__(self):
        return self._lock.__enter__()

    def __exit__(self, *exc):
        self.release()


@pytest.mark.parametrize("by", ["a flush", "a flush that stalled", "a waiting thread's flush"])
def test_a_ctrl_c_once_held_frames_are_out_or_put_back_keeps_the_link(pair, monkeypatch, by):
    ch, theirs, closed = pair
    for i in range(3):
        ch.send([b"%08d" % i, b"x" * 8], hold=True)
    if by == "a flush that stalled":  # its send timeout passes with nothing taken: the reactor writes them
        native = ch.stream._send

        def stalled(fd, pieces, box, flags=0):
            monkeypatch.setattr(ch.stream, "_send", native)
            raise BlockingIOError

        monkeypatch.setattr(ch.stream, "_send", stalled)
    lock = ch._send_lock = CtrlCAsReleased()
    lock.armed = True
    with pytest.raises(KeyboardInterrupt):
        if by.startswith("a flush"):
            ch.flush()
        else:
            coalescing.flush_all()
    assert closed == [] and ch.state is channel_mod._ACTIVE  # all of it went out (or waits): no reason to break the link
    assert parse(received(theirs, 3 * len(encoded(0)))) == [[b"%08d" % i, b"x" * 8] for i in range(3)]
