"""The byte stream under a connection: five methods, so tests can replay chunks without a socket.

``get_extra_info("socket")`` is how the reactor finds what to watch; an in-memory stream has none.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from mesh_client._src.runtime import natives


class Stream(Protocol):
    def read(self, max_bytes: int) -> bytes: ...
    def read_into(self, view: memoryview) -> int: ...
    def write(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None: ...
    def close(self) -> None: ...
    def get_extra_info(self, name: str) -> Any: ...


# The write whose count survives a Ctrl-C (_sends.c, :mod:`.natives`): (fd, pieces, box) ->
# count, or NotImplemented. None where the install built none: a write a Ctrl-C cuts short
# then breaks its link.
_send: Callable[..., Any] | None = natives.sends_module.send if natives.sends_module is not None else None


def send_available(sock: socket.socket, data: bytes | bytearray) -> int:
    """Send as much of ``data`` as ``sock`` takes now, never blocking; how much went out."""
    view = memoryview(data)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(view[sent:], socket.MSG_DONTWAIT)
    except BlockingIOError:
        pass
    finally:
        view.release()
    return sent


def begin_write(stream: Stream) -> None:
    """Before a write that :func:`unsent` may be asked about: see :meth:`SocketStream.begin_write`
    (other streams know no count)."""
    if isinstance(stream, SocketStream):
        stream.begin_write()


def unsent(stream: Stream, pieces: Sequence[bytes | bytearray | memoryview]) -> list[memoryview] | None:
    """After a write of ``pieces`` that an exception (a Ctrl-C) cut short: what of them did not
    go out (empty: the frame went out whole), or None where that is not known."""
    done = getattr(stream, "written", -1)
    if done < 0:
        return None
    views = [memoryview(p).cast("B") for p in pieces if len(p)]
    _drop_front(views, done)
    return views


# sendmsg accepts at most this many pieces at once (IOV_MAX is 1024 on Linux).
_MAX_IOV = 512
# An AF_UNIX stream's send buffer is all the room a frame has in flight (no receive buffer
# behind it): the default (net.core.wmem_default, 208 KiB) makes a 1 MiB frame wait five times
# for the receiver; loopback TCP grows its own to 4 MiB. 1 MiB echo on the 16-core host, a
# reactor-like receiver: 463-471 us with the default, 418-420 us with this.
UNIX_SEND_BUFFER = 4 << 20
#: TCP keepalive of a link: probed after this long without traffic, then every
#: KEEPALIVE_INTERVAL_SECONDS, dropped after KEEPALIVE_PROBES unanswered probes. A peer's kernel
#: answers the probes while the peer lives (however long an actor computes), so only a peer gone
#: from the network without a FIN or RST (its node powered off, a partition, a pod network
#: that drops its packets) ends the link: within about a minute and a half, and its calls then
#: fail as a lost proc's, instead of waiting for a reply that cannot come, for ever.
KEEPALIVE_IDLE_SECONDS = 30
KEEPALIVE_INTERVAL_SECONDS = 15
KEEPALIVE_PROBES = 4


def unacknowledged_limit_ms() -> int:
    """TCP_USER_TIMEOUT of a link: keepalive's own budget (idle, then every probe unanswered).
    Keepalive probes only an idle link; bytes sent to a peer gone from the network (a call made
    after the cut) are retransmitted instead, for about 15 minutes (``tcp_retries2``): with this
    limit such a link ends as soon as an idle one would. Its price: a live peer that reads
    nothing this long while megabytes wait for it (a process stopped by Ctrl-Z or a debugger,
    its receive buffer full: a zero window) loses the link too, as ``BACKLOG_LIMIT`` in
    :mod:`.channel` ends it for one that never reads."""
    return (KEEPALIVE_IDLE_SECONDS + KEEPALIVE_INTERVAL_SECONDS * KEEPALIVE_PROBES) * 1000


def keep_alive(sock: socket.socket) -> None:
    """TCP keepalive on ``sock`` as the ``KEEPALIVE_*`` constants say, and the same bound on
    data left unacknowledged (:func:`unacknowledged_limit_ms`; where the system lacks an
    option, its default stands)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)  # macOS's name
    if idle is not None:
        sock.setsockopt(socket.IPPROTO_TCP, idle, KEEPALIVE_IDLE_SECONDS)
    for name, value in (("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_SECONDS), ("TCP_KEEPCNT", KEEPALIVE_PROBES),
                        ("TCP_USER_TIMEOUT", unacknowledged_limit_ms())):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class Stalled(Exception):
    """A write to a peer that took nothing for the socket's send timeout (:meth:`SocketStream.
    stall_after`): ``rest`` is what was not sent, the frame's bytes from where it stopped."""

    def __init__(self, rest: list[memoryview]) -> None:
        super().__init__("the peer took nothing within the send timeout")
        self.rest = rest


class SocketStream:
    """A connected stream socket, TCP or AF_UNIX (:mod:`.unixlinks`). ``read`` returns b"" at end
    of stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # How much of the frame being written went out, for :func:`unsent` (-1: not known).
        # A one-item list, so _sends.c stores the count before Python can raise a Ctrl-C.
        self._box = [-1]
        self._send = _send if isinstance(sock, socket.socket) else None  # not for a test's stand-in
        if sock.family in (socket.AF_INET, socket.AF_INET6):  # Nagle is TCP's: AF_UNIX has no such option
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            keep_alive(sock)
        elif sock.family == socket.AF_UNIX:
            with contextlib.suppress(OSError):  # the kernel caps it at net.core.wmem_max
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, UNIX_SEND_BUFFER)

    def read(self, max_bytes: int) -> bytes:
        return self.sock.recv(max_bytes)

    def read_into(self, view: memoryview) -> int:
        return self.sock.recv_into(view)

    def stall_after(self, seconds: float) -> None:
        """Let a blocking write that the peer takes nothing of for ``seconds`` raise
        :class:`Stalled` (SO_SNDTIMEO: no poll added to each write, as a Python timeout would)."""
        whole = int(seconds)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                             struct.pack("ll", whole, int((seconds - whole) * 1_000_000)))

    @property
    def written(self) -> int:
        """Bytes of the frame being (or last) written that went out; -1 where not known."""
        return self._box[0]

    def write_available(self, data: bytes | bytearray) -> int:
        """Write as much of ``data`` as the socket takes now, never blocking; how much went out.
        For a thread's flush of held frames: :attr:`written` is the running count throughout
        (the native send adds to it before it returns), so a Ctrl-C there knows what went out
        and the rest is put back, where socket.send's count was lost and the link was cut."""
        box = self._box
        send = self._send
        if send is None or self.sock.gettimeout() is not None:
            box[0] = -1  # socket.send's count is lost to a Ctrl-C
            box[0] = send_available(self.sock, data)
            return box[0]
        box[0] = 0
        piece = bytes(data)  # the native send takes bytes (which no other thread can change)
        size = len(piece)
        try:
            while box[0] < size:
                done = box[0]
                send(self.sock.fileno(), [piece[done:] if done else piece], box, socket.MSG_DONTWAIT)
        except BlockingIOError:  # the socket takes no more now
            pass
        return box[0]

    def begin_write(self) -> None:
        """A write is about to start: nothing of it has gone out. Called before the caller marks
        itself as writing, so a Ctrl-C that lands in between (before :meth:`write` itself runs)
        reads 0, not the last write's count: -1 broke the link for nothing, and a stale count
        smaller than this frame would have sent its tail alone."""
        self._box[0] = 0

    def write(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        box = self._box
        if len(pieces) <= _MAX_IOV:  # the common case: one sendmsg takes the whole frame
            box[0] = 0  # a Ctrl-C before the send: nothing went out
            try:
                send = self._send
                # Not while the socket has a timeout (a handshake's): its descriptor is then
                # non-blocking, and a full buffer would read as a stall instead of a wait.
                sent = send(self.sock.fileno(), pieces, box) \
                    if send is not None and type(pieces) is list and self.sock.gettimeout() is None \
                    else NotImplemented
                if sent is NotImplemented:  # not all bytes: Python's, whose count a Ctrl-C loses
                    box[0] = -1
                    sent = self.sock.sendmsg(pieces)
            except BlockingIOError:  # the send timeout passed with nothing taken
                box[0] = 0
                raise Stalled([memoryview(p).cast("B") for p in pieces if len(p)]) from None
            total = 0
            for p in pieces:
                total += p.nbytes if type(p) is memoryview else len(p)
            if sent == total:
                box[0] = total
                return
            box[0] = -1
            self._write_rest(pieces, sent)
            return
        box[0] = -1
        self._write_rest(pieces, 0)

    def _write_rest(self, pieces: Sequence[bytes | bytearray | memoryview], skip: int) -> None:
        """Send ``pieces`` but their first ``skip`` bytes, however many sendmsg calls it takes."""
        views = [memoryview(p).cast("B") for p in pieces if len(p)]
        _drop_front(views, skip)
        while views:
            # Drop what went out; keep the unsent tail of a partially sent piece.
            try:
                sent = self.sock.sendmsg(views[:_MAX_IOV])
            except BlockingIOError:
                raise Stalled(views) from None
            _drop_front(views, sent)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def get_extra_info(self, name: str) -> Any:
        if name == "peername":
            return self.sock.getpeername()
        if name == "sockname":
            return self.sock.getsockname()
        if name == "socket":
            return self.sock
        return None


class MockStream:
    """Replays a list of byte chunks and records what was written (for tests of the protocol)."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = list(chunks)
        self.written = bytearray()
        self.closed = False

    def feed(self, *chunks: bytes) -> None:
        """More bytes from the peer, for a test that answers what the other side wrote."""
        self._chunks.extend(chunks)

    @property
    def pending(self) -> int:
        """Chunks not read yet; reading with none left gives end of stream."""
        return len(self._chunks)

    def read(self, max_bytes: int) -> bytes:
        if not self._chunks:
            return b""
        chunk = self._chunks.pop(0)
        if len(chunk) > max_bytes:
            self._chunks.insert(0, chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        return chunk

    def read_into(self, view: memoryview) -> int:
        data = self.read(view.nbytes)
        view[: len(data)] = data
        return len(data)

    def write(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        for p in pieces:
            self.written += p

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return ("mock", 0) if name == "peername" else None


def _drop_front(views: list[memoryview], count: int) -> None:
    """Remove the first ``count`` bytes of ``views``, in place."""
    while count and views:
        n = views[0].nbytes
        if count >= n:
            count -= n
            views.pop(0)
        else:
            views[0] = views[0][count:]
            count = 0
