"""One connection between a client and a proc server, driven by the reactor.

A :class:`Channel` owns a stream and a sans-IO :class:`~mesh_client._src.wire.protocol.Connection`.
The reactor calls :meth:`Channel.on_readable`; producers call :meth:`Channel.send` from their own
threads. Wire errors are mapped here, at the edge, into one close reason and a :class:`CloseKind`.

The channel only uses the five methods of :class:`~mesh_client._src.runtime.streams.Stream`;
the socket behind it (``get_extra_info("socket")``) matters only to :meth:`Channel.start`, which
registers it with the reactor, and to the non-blocking writes of held frames. Tests drive a
channel over an in-memory stream by calling :meth:`Channel.on_readable` themselves.

The reactor never waits on a peer: frames it sends itself (the replies a proc server gives on
the I/O thread, a tree's aggregated reply) are written only as far as the socket takes them at
once, and whatever waits (the rest, or a whole frame while another thread holds the send lock,
stuck writing to a peer that does not read) goes out from reactor timers. While any of it
waits, a server's channel is not read either: a peer that does not read its replies is not read
from, so it can neither make the proc buffer replies without bound nor stop other connections.

A sender that knows more is coming may ask for its frame to be *held* (``send(..., hold=True)``):
small frames then wait in the channel's :class:`~mesh_client._src.runtime.coalescing.Outbox`
and go out together, in order, at the latest ``coalescing.HOLD_SECONDS`` after the batch
began, by a reactor timer (:mod:`.coalescing` says who else writes them, and when). Any frame not held is written behind those held before it.
"""

from __future__ import annotations

import enum
import socket
import threading
from collections.abc import Callable, Sequence

from mesh_client._src.runtime import coalescing, handshaking, streams
from mesh_client._src.runtime import reactor as reactor_mod
from mesh_client._src.wire import binding, envelopes, errors, protocol

# Small frames are read through one reused buffer: a fresh 256 KiB bytes per recv would cost
# an mmap, an mremap and a munmap per message. Large frames bypass it (receive_buffer).
READ_CHUNK = 64 * 1024
# Until the peer has proved it holds the token it gets only this much: handshake frames are
# under 100 bytes, and a flood of unauthenticated connections must not cost 64 KiB each.
HANDSHAKE_READ_CHUNK = 1024
# Held frames the socket would not take without blocking are tried again from the reactor,
# after this long at first, then twice as long each time up to RETRY_MAX (a peer that reads
# nothing must not cost a busy loop).
RETRY_FIRST = 0.001
RETRY_MAX = 0.05
# A server's write that its peer takes nothing of for this long stops waiting: the rest, and
# every later frame to that peer, wait in memory for the reactor to write them (a controller
# paused in a debugger no longer holds up an actor that other callers share) ...
STALL_SECONDS = 1.0
# ... up to this many bytes, beyond which the connection is closed (its calls fail): a peer that
# does not read cannot make the proc hold its replies without bound.
BACKLOG_LIMIT = 64 << 20


class ChannelState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"
    ACTIVE = "ACTIVE"
    CLOSED = "CLOSED"


# Looked up once: an enum member's attribute lookup costs more than the rest of a state check.
_ACTIVE = ChannelState.ACTIVE
_CLOSED = ChannelState.CLOSED
_AUTHENTICATED = protocol.State.AUTHENTICATED
_REFUSED, _BEGAN, _HELD, _FULL = coalescing.REFUSED, coalescing.BEGAN, coalescing.HELD, coalescing.FULL


class CloseKind(enum.Enum):
    """Why a channel closed, for whoever decides what to log (no parsing of reason strings)."""

    PEER_LEFT = "PEER_LEFT"  # end of stream, or a reset, from the peer between frames
    AUTH_FAILED = "AUTH_FAILED"  # the peer refused our token or presented a wrong one
    PROTOCOL_ERROR = "PROTOCOL_ERROR"  # the peer sent bytes that are not a valid frame here
    IO_ERROR = "IO_ERROR"  # the socket failed
    LOCAL = "LOCAL"  # this side closed it (a timeout, a stop, the client letting go)


class ChannelClosed(ConnectionError):
    """Sending on a channel that is closed; ``reason`` says why it closed."""


MessageHandler = Callable[["Channel", envelopes.Received], None]
# Every small message of one read at once, in order: one call per read instead of one per message.
# It stops at the first message after which the channel is closed, as the channel would.
BatchHandler = Callable[["Channel", list[envelopes.Received]], None]
CloseHandler = Callable[["Channel", str], None]


class Channel:
    """An authenticated (or authenticating) connection registered with the reactor."""

    def __init__(
        self,
        stream: streams.Stream,
        conn: protocol.Connection,
        *,
        on_message: MessageHandler,
        on_closed: CloseHandler,
        display: str,
        on_authenticated: Callable[[Channel], None] | None = None,  # a server's: ends its handshake deadline
        reactor: reactor_mod.Reactor | None = None,
        on_messages: BatchHandler | None = None,  # None: on_message for each message of a read
    ) -> None:
        self.stream = stream
        self.conn = conn
        self.display = display
        self.on_message = on_message
        self.on_messages = on_messages
        self.on_closed = on_closed
        self.on_authenticated = on_authenticated
        self.close_reason: str | None = None
        self.close_kind: CloseKind | None = None
        self.bytes_received = 0  # a connection closed with none was a probe, not an attack
        self.authenticated = conn.state is protocol.State.AUTHENTICATED
        self._send_lock = threading.Lock()
        self._outbox = coalescing.Outbox()  # held frames, guarded by _send_lock
        self._retry = 0.0  # the delay of the reactor's next try at held frames, 0 while none is due
        self._reactor = reactor or reactor_mod.get_reactor()
        self._fileno = -1  # set by start(): the socket registered with the reactor
        self._sock: socket.socket | None = None  # set by start(): for writes that must not block
        # The reactor's own frames not yet in the outbox (the send lock was taken), and whether
        # a timer will push them (and the outbox) out; reading pauses while any wait.
        self._unsent = bytearray()  # reactor thread only, like the two below
        self._pump_due = False
        self._flush_due = False  # a _flush_timer is pending (any thread sets it)
        self._paused = False
        # A peer stopped reading (a write stalled): frames queue in the outbox, behind what waits
        # for it, and the reactor writes them as it reads again. Under the send lock.
        self._backlog = False
        # Only a server stops reading a peer that does not read: a client always reads its
        # replies, so two sides waiting on each other never both stop.
        self._may_pause = conn.role is protocol.Role.SERVER
        self._chunk = memoryview(bytearray(READ_CHUNK if self.authenticated else HANDSHAKE_READ_CHUNK))
        self.state = (
            ChannelState.ACTIVE if conn.state is protocol.State.AUTHENTICATED else ChannelState.HANDSHAKE
        )

    def __repr__(self) -> str:
        return f"<Channel {self.display} {self.state.value}>"

    def fileno(self) -> int:
        return self._fileno

    @property
    def prioritized(self) -> bool:
        """Authenticated channels are read before unauthenticated ones (see the reactor)."""
        return self.authenticated

    def start(self) -> None:
        """Hand the channel to the reactor, which calls :meth:`on_readable` from then on."""
        sock = self.stream.get_extra_info("socket")
        if sock is None:
            raise TypeError(
                f"channel {self.display}: its stream has no socket for the reactor to watch; "
                "drive an in-memory stream by calling on_readable() instead"
            )
        self._fileno = sock.fileno()
        self._sock = sock
        self._reactor.register(self)

    # Writing (any thread) ---------------------------------------------------------------------

    def send(self, segments: Sequence[bytes | bytearray | memoryview], hold: bool = False) -> None:
        """Send one message; raises :class:`ChannelClosed` if the connection is gone.

        ``hold``: more is coming, so a small frame may wait in the outbox (copied) to go out
        with the next ones; it goes at the latest ``coalescing.HOLD_SECONDS`` later."""
        if self.state is not _ACTIVE:
            raise ChannelClosed(self.close_reason or f"channel {self.display} is not active")
        try:
            pieces = self.conn.send_message(segments)
        except errors.ProtocolError as exc:  # closed by the reactor since the check above
            raise ChannelClosed(self.close_reason or str(exc)) from exc
        self.send_frame(pieces, hold)

    def send_frame(self, pieces: list[bytes | bytearray | memoryview], hold: bool = False) -> None:
        """Send one MESSAGE frame already packed (:mod:`mesh_client._src.wire.packing`: a
        request's or a reply's frame header and envelope in one piece); as :meth:`send`."""
        if self.state is not _ACTIVE or self.conn.state is not _AUTHENTICATED:  # as send_message checks
            raise ChannelClosed(self.close_reason or f"channel {self.display} is not active")
        if self._sock is not None and self._reactor.on_thread:
            self._send_from_reactor(pieces)
            return
        writing = False
        try:
            with self._send_lock:
                if self.state is _CLOSED:  # closed by another thread since the check: nothing may stay held
                    raise ChannelClosed(self.close_reason or f"channel {self.display} is closed")
                if self._backlog:  # behind what its peer has not taken yet, without waiting for it
                    over = self._queue_behind(pieces)
                    if over is None:
                        return
                    raise ChannelClosed(over)
                outbox = self._outbox
                held = outbox.hold(pieces) if hold else _REFUSED
                if held == _HELD:
                    return
                if held == _BEGAN:  # a new batch: the reactor writes it if nobody does sooner
                    coalescing.note(self)
                    self._reactor.call_later(coalescing.HOLD_SECONDS, self._flush_soon)
                    return
                # Writing from here: held frames taken from the outbox must go out, or the link
                # is cut (their callers would wait for replies to frames never sent).
                streams.begin_write(self.stream)
                writing = True
                # The held frames as bytes: the native write (whose count survives a Ctrl-C)
                # takes bytes only, and socket.sendmsg's count is lost to one.
                if held == _FULL:
                    pieces = [bytes(outbox.take())]
                    coalescing.forget(self)
                elif outbox.frames:  # behind the held ones, in the same write
                    pieces = [bytes(outbox.take()), *pieces]
                    coalescing.forget(self)
                # Writing until what did not go out is back in the outbox: a second Ctrl-C
                # before that (a storm of them) would lose it, the link kept, unless it is cut.
                try:
                    self.stream.write(pieces)
                    writing = False
                except streams.Stalled as stalled:
                    over = self._stall(stalled.rest)
                    writing = False
                    if over is not None:
                        raise ChannelClosed(over) from None
                except KeyboardInterrupt:  # a Ctrl-C as the write ended (or in it): how far did it get?
                    rest = streams.unsent(self.stream, pieces)
                    if rest is not None:  # known: the frame went out whole, or the reactor ends it
                        if rest:
                            self._stall(rest)
                        writing = False
                    raise
        except OSError as exc:
            self.close(f"connection to {self.display} broke while sending: {exc}", CloseKind.IO_ERROR)
            raise ChannelClosed(self.close_reason or str(exc)) from exc
        except BaseException as exc:
            if writing:
                self._cut_short(exc)
            raise

    def flush(self, block: bool = True) -> None:
        """Write the held frames (any thread). ``block=False``: only what the socket takes now;
        the reactor tries the rest again later (a thread about to wait, or the reactor itself,
        must not get stuck behind a peer that does not read)."""
        if not self._outbox.frames:
            return
        if not self._send_lock.acquire(blocking=block):
            # Another thread is writing (it takes the held frames along) or holding one more
            # frame: look again soon rather than wait behind a write to a peer that may not read.
            self._flush_later()
            return
        retry = False
        writing = False
        try:
            try:
                if not self._outbox.frames:
                    return
                # Writing (as in send_frame) from taking the held frames until they are out or
                # back in the outbox: a Ctrl-C in between cuts the link; after, nothing is lost.
                writing = True
                if self._backlog:  # the reactor writes it, as the peer reads
                    retry = False
                elif block or self._sock is None:
                    pieces = [bytes(self._outbox.take())]  # bytes: as in send_frame
                    coalescing.forget(self)
                    streams.begin_write(self.stream)
                    try:
                        self.stream.write(pieces)
                        writing = False
                    except streams.Stalled as stalled:
                        self._stall(stalled.rest)
                        writing = False
                    except KeyboardInterrupt:  # a Ctrl-C of a thread about to wait, as in send_frame
                        rest = streams.unsent(self.stream, pieces)
                        if rest is not None:
                            if rest:
                                self._stall(rest)
                            writing = False
                        raise
                elif self._reactor.on_thread or not isinstance(self.stream, streams.SocketStream):
                    if self._write_held_now():
                        retry = True
                    else:
                        self._retry = 0.0
                else:  # a thread that a Ctrl-C may interrupt: the stream counts what went out
                    streams.begin_write(self.stream)  # first: a Ctrl-C reads this write's count
                    data = self._outbox.take()
                    coalescing.forget(self)
                    try:
                        sent = self.stream.write_available(data)
                    except KeyboardInterrupt:
                        sent = self.stream.written
                        if sent >= 0:  # known: what did not go out waits for the next write
                            self._put_back_unwritten(data, sent)
                            writing = False
                        raise
                    retry = self._put_back_unwritten(data, sent)
                    writing = False
                    if not retry:
                        self._retry = 0.0
            finally:
                self._send_lock.release()
        except OSError as exc:
            self.close(f"connection to {self.display} broke while sending: {exc}", CloseKind.IO_ERROR)
            return
        except BaseException as exc:
            if writing:
                self._cut_short(exc)
            raise
        if retry:
            self._flush_later()

    def _stall(self, rest: list[memoryview]) -> str | None:
        """With the send lock held: a write stalled, ``rest`` unsent. It waits in the outbox for
        the reactor (which stops reading the peer meanwhile), and so do the frames after it
        (:meth:`_queue_behind`); None, or why the connection is closing (over the limit)."""
        self._backlog = True
        unsent = bytearray()
        for view in rest:
            unsent += view
        self._outbox.put_back(unsent)
        coalescing.forget(self)
        self._reactor.call_soon(self._pump)
        return self._over_limit()

    def _queue_behind(self, pieces: Sequence[bytes | bytearray | memoryview]) -> str | None:
        """With the send lock held, a backlog waiting: ``pieces`` (copied) go behind it."""
        self._outbox.extend(pieces)
        return self._over_limit()

    def _over_limit(self) -> str | None:
        """Past BACKLOG_LIMIT: close (at once, from the reactor: this thread holds the send lock)."""
        waiting = len(self._outbox)
        if waiting <= BACKLOG_LIMIT:
            return None
        reason = (f"{self.display} stopped reading its replies: {waiting >> 20} MiB of them waited unsent, over "
                  f"the {BACKLOG_LIMIT >> 20} MiB a peer may leave; the proc closed the connection")
        self._reactor.call_soon(lambda: self.close(reason, CloseKind.IO_ERROR))
        return reason

    def _flush_later(self) -> None:
        """One try at the held frames later, after a doubling delay: one pending at a time, so
        a writer stuck on a peer that does not read (holding the send lock) costs the reactor a
        few wake-ups a second, however many threads find the lock busy meanwhile."""
        if not self._flush_due:
            self._flush_due = True
            self._retry = self._next_retry()
            self._reactor.call_later(self._retry, self._flush_timer)

    def _flush_timer(self) -> None:
        self._flush_due = False
        self.flush(block=False)

    def _put_back_unwritten(self, data: bytearray, sent: int) -> bool:
        """With the send lock held: the bytes of a taken batch after ``sent`` back into the
        outbox, noted for the next waiting thread; whether any were left."""
        if sent >= len(data):
            return False
        self._outbox.put_back(data[sent:])
        coalescing.note(self)
        return True

    def _write_held_now(self) -> bool:
        """With the send lock held: write the held bytes as far as the socket takes them now;
        the rest stays held (and noted, for the next waiting thread). Whether any is left."""
        outbox = self._outbox
        data = outbox.take()
        coalescing.forget(self)
        rest = self._write_now(data)
        if rest:
            outbox.put_back(rest)
            coalescing.note(self)
        return bool(rest)

    def _next_retry(self) -> float:
        """The delay before the next try at a socket that took less than all: doubling."""
        return min(max(self._retry * 2, RETRY_FIRST), RETRY_MAX)

    def _cut_short(self, exc: BaseException) -> None:
        """A write that an exception other than OSError (a Ctrl-C in the caller's thread) cut
        short: part of a frame may be out, and the peer would read the next one as the rest of
        it (every later call on this connection would hang). The link is closed as broken, so
        the calls on it fail now and a proc that is alive is reached again (:mod:`.relinking`)."""
        self.close(f"a write to {self.display} was interrupted part way through a message "
                   f"({type(exc).__name__})", CloseKind.IO_ERROR)

    def _flush_soon(self) -> None:
        """The reactor's timer (or retry) at the held frames: it must never block."""
        self.flush(block=False)

    # The reactor's own writes (reactor thread only) ---------------------------------------------

    def _send_from_reactor(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        """A frame sent on the reactor thread: copied, and written as far as it goes now."""
        for p in pieces:
            self._unsent += p
        self._pump()

    def _pump(self) -> None:
        """Write what the reactor's frames and the outbox hold, as far as the socket takes it
        without blocking, and without waiting for the send lock (its holder may be stuck on
        this very peer). What is left goes from a timer, and reading pauses until it is gone."""
        if self.state is _CLOSED:
            self._unsent = bytearray()
            return
        if not self._send_lock.acquire(blocking=False):  # another thread is writing: try again
            if self._unsent:
                self._pause()
            if self._unsent or self._outbox.frames:
                self._pump_later()
            return
        try:
            if self.state is _CLOSED:
                self._unsent = bytearray()
                return
            if self._unsent:
                self._outbox.append(self._unsent)
                self._unsent = bytearray()
            left = self._write_held_now() if self._outbox.frames else False
            self._backlog = self._backlog and left  # all written: writers write themselves again
        except OSError as exc:
            broke: OSError | None = exc
        else:
            broke = None
        finally:
            self._send_lock.release()
        if broke is not None:
            self.close(f"connection to {self.display} broke while sending: {broke}", CloseKind.IO_ERROR)
        elif left:
            self._pause()
            self._pump_later()
        else:
            self._retry = 0.0
            if self._paused:
                self._paused = False
                self._reactor.register(self)

    def _pause(self) -> None:
        """Stop reading this peer until what waits for it is written (servers only)."""
        if self._may_pause and not self._paused and self._fileno >= 0:
            self._paused = True
            self._reactor.unregister(self)

    def _pump_later(self) -> None:
        if not self._pump_due:
            self._pump_due = True
            self._retry = self._next_retry()
            self._reactor.call_later(self._retry, self._pump_timer)

    def _pump_timer(self) -> None:
        self._pump_due = False
        self._pump()

    def _write_now(self, data: bytearray) -> bytearray:
        """Write as much of ``data`` as the socket takes without blocking; the rest."""
        assert self._sock is not None
        sent = streams.send_available(self._sock, data)
        return data[sent:] if sent < len(data) else bytearray()

    # Reading (reactor thread) -----------------------------------------------------------------

    def on_readable(self) -> None:
        if self.state is ChannelState.CLOSED:
            return
        try:
            view = self.conn.receive_buffer()
            if view is not None:
                n = self.stream.read_into(view)
                self.bytes_received += n
                self.conn.buffer_filled(n)
            else:
                n = self.stream.read_into(self._chunk)
                self.bytes_received += n
                self.conn.receive_data(self._chunk[:n] if n else b"")
            self._drain_events()
        except errors.AuthenticationError as exc:
            self._flush_handshake()
            self.close(str(exc), CloseKind.AUTH_FAILED)
        except errors.ProtocolError as exc:
            self._send_last_words(f"protocol error: {exc}")
            self.close(f"protocol error from {self.display}: {exc}", CloseKind.PROTOCOL_ERROR)
        except (ConnectionResetError, BrokenPipeError) as exc:
            self.close(f"{self.display} reset the connection: {exc}", CloseKind.PEER_LEFT)
        except OSError as exc:
            self.close(f"connection to {self.display} failed: {exc}", CloseKind.IO_ERROR)

    def _drain_events(self) -> None:
        if self.authenticated:  # every small message of the read at once, then what else is left
            batch = self.conn.take_messages()
            if batch:
                if self.on_messages is not None:
                    self.on_messages(self, batch)
                    if self.state is _CLOSED:
                        return
                else:
                    on_message = self.on_message
                    for segments in batch:
                        on_message(self, segments)
                        if self.state is _CLOSED:
                            return
            if self.conn.idle():
                return
        while True:
            event = self.conn.next_event()
            if event is protocol.NEED_DATA:
                if not self.authenticated:  # only the handshake queues bytes of its own to send
                    self._flush_handshake()
                return
            if type(event) is protocol.Message:
                self.on_message(self, event.segments)
            elif isinstance(event, protocol.Authenticated):
                self._flush_handshake()
                self.authenticated = True
                self.state = ChannelState.ACTIVE
                self._chunk = memoryview(bytearray(READ_CHUNK))
                if self.on_authenticated is not None:
                    self.on_authenticated(self)
            elif isinstance(event, protocol.Closed):
                if event.reason:  # an ERROR frame: the peer said why
                    self.close(event.reason, CloseKind.PROTOCOL_ERROR)
                else:
                    self.close(f"{self.display} closed the connection", CloseKind.PEER_LEFT)
                return

    def _flush_handshake(self) -> None:
        data = self.conn.data_to_send()
        if data:
            try:
                with self._send_lock:
                    self.stream.write([data])
            except OSError:
                pass

    def _send_last_words(self, reason: str) -> None:
        data = self.conn.send_error(reason)
        if self._sock is None:  # an in-memory stream: no reactor to keep going
            try:
                with self._send_lock:
                    self.stream.write([data])
            except OSError:
                pass
            return
        # On the reactor: only what the socket takes now, behind what waits; none if another
        # thread is writing (it may be stuck on this peer, which is about to be closed anyway).
        if not self._send_lock.acquire(blocking=False):
            return
        try:
            waiting = self._outbox.take() if self._outbox.frames else bytearray()
            coalescing.forget(self)
            self._write_now(waiting + self._unsent + data)
            self._unsent = bytearray()
        except OSError:
            pass
        finally:
            self._send_lock.release()

    def close(self, reason: str, kind: CloseKind = CloseKind.LOCAL) -> None:
        """Close once; the close handler learns the reason (and ``close_kind`` is set).

        Held frames go out first when this side closes (as frames written before a close
        would); on any other close they are dropped, and their callers' calls fail with the
        rest (the close handler)."""
        self._take_send_lock(kind)
        try:
            if self.state is ChannelState.CLOSED:
                return
            self.state = ChannelState.CLOSED
            self.close_reason = reason
            self.close_kind = kind
            held = self._outbox.take() if self._outbox else None
            on_reactor = self._reactor.on_thread
            if on_reactor and self._unsent:  # the reactor's own frames, behind the held ones
                held = (held or bytearray()) + self._unsent
                self._unsent = bytearray()
            if held is not None:
                coalescing.forget(self)
                if kind is CloseKind.LOCAL:
                    try:
                        self._write_now(held) if on_reactor and self._sock is not None else self.stream.write([held])
                    except (OSError, streams.Stalled):
                        pass
        finally:
            self._send_lock.release()
        if self._fileno < 0:  # never registered (an in-memory stream)
            self.stream.close()
        else:
            self._reactor.unregister(self)
            # Unregister runs on the reactor thread before the descriptor may be reused.
            self._reactor.call_soon(self.stream.close) if not self._reactor.on_thread else self.stream.close()
        self.on_closed(self, reason)

    def _take_send_lock(self, kind: CloseKind) -> None:
        """The send lock, for closing. The reactor must not wait for a writer stuck on a peer
        that does not read: when the peer is at fault it shuts the socket down first, which
        makes that write fail at once (and its thread let go of the lock)."""
        if self._send_lock.acquire(blocking=False):
            return
        if kind is not CloseKind.LOCAL and self._sock is not None and self._reactor.on_thread:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._send_lock.acquire()


Opener = Callable[[tuple[str, int], float], streams.SocketStream]


def open_tcp(address: tuple[str, int], timeout: float) -> streams.SocketStream:
    """A direct TCP connection: the default way to reach a proc server."""
    return streams.SocketStream(socket.create_connection(address, timeout=timeout))


def connect(
    address: tuple[str, int],
    token: bytes,
    *,
    on_message: MessageHandler,
    on_closed: CloseHandler,
    on_messages: BatchHandler | None = None,
    timeout: float = 10.0,
    display: str | None = None,
    opener: Opener = open_tcp,
    meant: binding.ProcId | None = None,
) -> Channel:
    """Connect and authenticate in the calling thread, then hand the channel to the reactor.

    ``meant``: the proc the handshake names; another one (a stale address, a relay) is refused
    on both sides (:mod:`mesh_client._src.wire.binding`). None: any proc of the mesh."""
    display = display or f"{address[0]}:{address[1]}"
    stream = opener(address, timeout)
    sock = stream.get_extra_info("socket")
    within = handshaking.bound(stream, timeout)  # the whole handshake's
    sock.settimeout(within)
    conn = protocol.Connection(protocol.Role.CLIENT, token, meant=meant)
    conn.start()
    try:
        handshaking.authenticate(stream, conn, display, within)
    except BaseException:
        stream.close()
        raise
    sock.settimeout(None)
    channel = Channel(stream, conn, on_message=on_message, on_closed=on_closed, display=display, on_messages=on_messages)
    channel.start()
    return channel
