"""Sans-IO state machine of one proc-server connection: bytes in, events out, bytes to send.

Rule: everything that decides whether a byte may be interpreted lives here. Until the state is
``AUTHENTICATED`` only handshake frames of at most ``MAX_HANDSHAKE_FRAME`` bytes are accepted and
nothing is unpickled anywhere; a peer of another protocol version (:mod:`.versions`, in each
handshake frame's header) is refused in the handshake, and so is a handshake meant for another
proc, or answered by one (:mod:`.binding`), on both sides; the runtime (:mod:`mesh_client._src.runtime.channel`, and
:mod:`mesh_client._src.runtime.handshaking` for one-shot clients) only moves bytes between a
stream and this object, as httpcore does around h11.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from mesh_client._src.wire import auth, binding, errors, frames, native, receiving, versions

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024**3


#: The REJECT a server sends for a wrong token (a client raises :class:`~.errors.TokenRefused` on it).
WRONG_TOKEN = b"authentication failed: wrong mesh token"
#: The most bytes a proc's name in AUTH or WELCOME takes (:func:`.binding.encode`).
MAX_BINDING = binding.MAX_INCARNATION + 1 + binding.MAX_NAME_BYTES

def printable(text: str) -> str:
    """``text`` with control and format characters escaped: the reason of a REJECT comes from a
    peer that proved nothing yet, and goes into exceptions, logs and terminals (a newline or an
    escape sequence there could forge lines or hide the rest)."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


class State(enum.Enum):
    NEW = "NEW"
    AWAIT_HELLO = "AWAIT_HELLO"  # client: waiting for the server's nonce
    AWAIT_AUTH = "AWAIT_AUTH"  # server: waiting for the client's proof
    AWAIT_WELCOME = "AWAIT_WELCOME"  # client: waiting for the server's proof
    AUTHENTICATED = "AUTHENTICATED"
    CLOSED = "CLOSED"


# Which frame kinds each state accepts; anything else is a protocol error.
ACCEPTS: dict[State, frozenset[frames.Kind]] = {
    State.NEW: frozenset(),
    State.AWAIT_HELLO: frozenset({frames.Kind.HELLO, frames.Kind.REJECT}),
    State.AWAIT_AUTH: frozenset({frames.Kind.AUTH}),
    State.AWAIT_WELCOME: frozenset({frames.Kind.WELCOME, frames.Kind.REJECT}),
    State.AUTHENTICATED: frozenset({frames.Kind.MESSAGE, frames.Kind.ERROR}),
    State.CLOSED: frozenset(),
}


@dataclasses.dataclass(frozen=True)
class Authenticated:
    """Both sides proved they hold the token; messages may flow."""


class Message(NamedTuple):
    """One authenticated message: its segments, as written by the sender.
    (A named tuple, not a frozen dataclass: one is made per message, on the I/O thread.)"""

    segments: list[bytes | bytearray | memoryview]


@dataclasses.dataclass(frozen=True)
class Closed:
    """The peer ended the connection; ``reason`` is what it said, if anything."""

    reason: str | None = None


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()
_MESSAGE = int(frames.Kind.MESSAGE)
_AUTHENTICATED = State.AUTHENTICATED  # looked up once: an enum member's lookup is slow on the hot path
_MAGIC, _VERSION = frames.MAGIC, frames.VERSION
_TWO = frames.head_struct(2)  # a frame of two segments: an envelope and one payload segment
_TWO_SIZE = _TWO.size
# Structs that copy out a two-segment frame's segments as bytes in one call (cheaper than two
# slices and two copies), by their lengths; calls and replies have few shapes (bounded anyway).
_pairs: dict[tuple[int, int], struct.Struct] = {}
PAIRS_KEPT = 1024


def _pair(n0: int, n1: int) -> struct.Struct:
    if len(_pairs) >= PAIRS_KEPT:
        _pairs.clear()
    st = _pairs[(n0, n1)] = struct.Struct(f"{n0}s{n1}s")
    return st


def _take_py(buf: bytes | bytearray | memoryview, pos: int, limit: int,
             max_segments: int) -> tuple[list[list[bytes | bytearray | memoryview]], int]:
    """The complete MESSAGE frames of at most ``limit`` bytes of segments at ``buf[pos:]``, and
    where they end: :meth:`Connection.take_messages`'s parse (``_frames.take`` where built)."""
    out: list[list[bytes | bytearray | memoryview]] = []
    end = len(buf)
    unpack, heads, size = frames.HEADER.unpack_from, frames._HEADS, frames.HEADER.size
    unpack_two = _TWO.unpack_from
    while end - pos >= size:
        if end - pos >= _TWO_SIZE:  # the header and two lengths in one unpack: every call and reply
            magic, version, kind_number, count, _, n0, n1 = unpack_two(buf, pos)
            if count == 2 and kind_number == _MESSAGE and magic == _MAGIC and version == _VERSION:
                at = pos + _TWO_SIZE
                stop = at + n0 + n1  # flagged lengths (large) fail the limit
                if n0 + n1 > limit or stop > end:
                    break
                pair = _pairs.get((n0, n1)) or _pair(n0, n1)
                out.append(list(pair.unpack_from(buf, at)))  # both segments as bytes, in one call
                pos = stop
                continue
        magic, version, kind_number, count, _ = unpack(buf, pos)
        if kind_number != _MESSAGE or magic != frames.MAGIC or version != frames.VERSION or count > max_segments:
            break
        at = pos + size + 8 * count
        if at > end:
            break
        st = heads.get(count) or frames.head_struct(count)
        lengths = st.unpack_from(buf, pos)[5:]
        total = sum(lengths)
        if total > limit or at + total > end:
            break
        if count == 1:
            segments: list[bytes | bytearray | memoryview] = [bytes(buf[at : at + total])]
        else:
            segments = []
            for n in lengths:
                segments.append(bytes(buf[at : at + n]))
                at += n
        out.append(segments)
        pos = at + total if count == 1 else at
    return out, pos


# The same in C where built (:mod:`.native`).
_take: Callable[[bytes | bytearray | memoryview, int, int, int], tuple[list[list[bytes | bytearray | memoryview]], int]] = \
    _take_py if native.frames is None else native.frames.take

Event = Authenticated | Message | Closed


class Connection:
    """One end of a connection. Feed it with :meth:`receive_data`, drain :meth:`data_to_send`."""

    MAX_HANDSHAKE_FRAME = 1024
    MAX_SEGMENTS = 4096
    # Frames larger than this get buffers that the socket fills directly (:mod:`.receiving`).
    LARGE_FRAME = 64 * 1024

    def __init__(
        self,
        role: Role,
        token: bytes,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        nonce: Callable[[int], bytes] = os.urandom,  # a fixed source for tests
        protocol_version: int | None = None,  # None: versions.PROTOCOL_VERSION; another one for tests
        meant: binding.ProcId | None = None,  # a client's: the proc it means (None: any of the mesh)
        own: binding.ProcId | None = None,  # a server's: the proc it is
    ) -> None:
        if not token:
            raise ValueError("the mesh token is empty: set PROCMESH_TOKEN or PROCMESH_TOKEN_FILE")
        self.role = role
        self.state = State.NEW
        self._token = token
        self._nonce = nonce
        self.meant = meant
        self.own = own
        self._max_message = max_message_bytes
        self.protocol_version = versions.PROTOCOL_VERSION if protocol_version is None else protocol_version
        self._peer_version = 0  # the field of the last handshake frame received
        self._server_nonce = b""
        self._client_nonce = b""
        self._out = bytearray()
        # Unread bytes are either ``_buf[_pos:]`` (``_data`` is None) or ``_data[_pos:]``, the
        # caller's own buffer, parsed in place (``_buf`` is empty then): see receive_data.
        self._buf = bytearray()
        self._data: bytes | bytearray | memoryview | None = None
        self._pos = 0
        self._eof = False
        # A large frame in progress: its buffers, filled through receive_buffer().
        self._big: receiving.LargeFrame | None = None

    def __repr__(self) -> str:
        return f"<wire.Connection {self.role.value} {self.state.value}>"

    # Starting and the handshake ------------------------------------------------------------

    def start(self) -> None:
        """Begin the handshake: the server queues its nonce, the client waits for it."""
        if self.state is not State.NEW:
            raise errors.ProtocolError(f"start() called in state {self.state.value}")
        if self.role is Role.SERVER:
            self._server_nonce = self._nonce(auth.NONCE_BYTES)
            self._queue(frames.Kind.HELLO, self._server_nonce)
            self.state = State.AWAIT_AUTH
        else:
            self.state = State.AWAIT_HELLO

    def _handshake(self, kind: frames.Kind, body: bytes) -> Event | None:
        if kind is frames.Kind.REJECT:
            self.state = State.CLOSED
            refused = (errors.TokenRefused if body == WRONG_TOKEN else
                       errors.WrongProc if body.startswith(binding.REFUSAL) else errors.AuthenticationError)
            raise refused(f"the proc server refused the connection: {printable(body.decode('utf-8', 'replace'))}")
        if kind is frames.Kind.HELLO:
            if len(body) != auth.NONCE_BYTES:
                raise errors.ProtocolError("malformed HELLO")
            if self._peer_version != self.protocol_version:
                self.state = State.CLOSED
                raise errors.VersionMismatch(versions.client_mismatch(self._peer_version, self.protocol_version))
            self._server_nonce = body
            self._client_nonce = self._nonce(auth.NONCE_BYTES)
            meant = binding.encode(self.meant)
            mac = auth.client_mac(self._token, self._server_nonce, self._client_nonce, meant)
            self._queue(frames.Kind.AUTH, self._client_nonce + mac + meant)
            self.state = State.AWAIT_WELCOME
            return None
        if kind is frames.Kind.AUTH:
            proof = auth.NONCE_BYTES + auth.MAC_BYTES
            if not proof <= len(body) <= proof + MAX_BINDING:
                raise errors.ProtocolError("malformed AUTH")
            self._client_nonce, mac, meant = body[: auth.NONCE_BYTES], body[auth.NONCE_BYTES : proof], body[proof:]
            expected = auth.client_mac(self._token, self._server_nonce, self._client_nonce, meant)
            if not auth.verify(expected, mac):
                self._queue(frames.Kind.REJECT, WRONG_TOKEN)
                self.state = State.CLOSED
                raise errors.AuthenticationError("a peer presented a wrong mesh token")
            if self._peer_version != self.protocol_version:
                self.state = State.CLOSED
                raise errors.VersionMismatch(versions.server_mismatch(self._peer_version, self.protocol_version))
            wanted = self._proc(meant, "AUTH")
            if not binding.answers_for(wanted, self.own):  # a relayed handshake, or a stale address
                assert wanted is not None
                reason = binding.refusal(wanted, self.own)
                self._queue(frames.Kind.REJECT, reason.encode()[: self.MAX_HANDSHAKE_FRAME - 64])
                self.state = State.CLOSED
                raise errors.WrongProc(reason)
            own = binding.encode(self.own)
            self._queue(frames.Kind.WELCOME, auth.server_mac(self._token, self._server_nonce, self._client_nonce, own) + own)
            self.state = State.AUTHENTICATED
            return Authenticated()
        # WELCOME: the server's proof, then who it is
        welcome, answer = body[: auth.MAC_BYTES], body[auth.MAC_BYTES :]
        expected = auth.server_mac(self._token, self._server_nonce, self._client_nonce, answer)
        if len(welcome) != auth.MAC_BYTES or len(answer) > MAX_BINDING or not auth.verify(expected, welcome):
            self.state = State.CLOSED
            raise errors.AuthenticationError(
                "the proc server could not prove it holds the mesh token: wrong token or not a procmesh server"
            )
        answered = self._proc(answer, "WELCOME")
        if not binding.answers_for(self.meant, answered):
            assert self.meant is not None
            self.state = State.CLOSED
            raise errors.WrongProc(binding.refusal(self.meant, answered))
        self.state = State.AUTHENTICATED
        return Authenticated()

    def _proc(self, blob: bytes, frame: str) -> binding.ProcId | None:
        """The proc named in a handshake frame whose MAC was verified."""
        try:
            return binding.decode(blob)
        except ValueError as exc:
            self.state = State.CLOSED
            raise errors.ProtocolError(f"malformed {frame}: {exc}") from None

    # Sending ---------------------------------------------------------------------------------

    def _queue(self, kind: frames.Kind, body: bytes) -> None:
        self._out += frames.encode_bytes(kind, [body], self.protocol_version)

    def data_to_send(self) -> bytes:
        """Bytes the handshake wants sent; empty when there are none."""
        out, self._out = bytes(self._out), bytearray()
        return out

    def send_message(self, segments: Sequence[bytes | bytearray | memoryview]) -> list[bytes | bytearray | memoryview]:
        """The pieces of one MESSAGE frame (no copy of the segments)."""
        if self.state is not _AUTHENTICATED:
            raise errors.ProtocolError(f"cannot send a message in state {self.state.value}")
        return frames.encode(_MESSAGE, segments)

    def send_error(self, reason: str) -> bytes:
        """A last frame telling the peer why we close; handshake states answer with REJECT."""
        kind = frames.Kind.ERROR if self.state is State.AUTHENTICATED else frames.Kind.REJECT
        self.state = State.CLOSED
        return frames.encode_bytes(kind, [reason.encode("utf-8")[: self.MAX_HANDSHAKE_FRAME - 64]])

    # Receiving -------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes from the peer; ``b""`` means end of stream.

        ``data`` is parsed in place, not copied, when nothing else is pending: the caller keeps
        it unchanged until :meth:`next_event` returns NEED_DATA (the channel's reused read
        buffer does; bytes objects always do). What a frame leaves unfinished is copied then."""
        if not data:
            self._eof = True
            return
        if self._big is not None and not self._big.complete:
            raise errors.ProtocolError("receive_data() while a large frame wants receive_buffer()")
        if self._data is not None:  # fed twice without draining: keep both, in order
            self._spill()
        if self._pos == len(self._buf):
            self._buf.clear()
            self._data, self._pos = data, 0
        else:
            self._buf += data

    def receive_buffer(self) -> memoryview | None:
        """Where to read the rest of a large frame into, or None to use :meth:`receive_data`."""
        if self._big is None or self._big.complete:
            return None
        return self._big.view()

    def buffer_filled(self, nbytes: int) -> None:
        """Report that ``nbytes`` were read into the view from :meth:`receive_buffer`."""
        if nbytes == 0:
            self._eof = True
            return
        assert self._big is not None, "buffer_filled() without a receive_buffer()"
        self._big.filled(nbytes)

    def next_event(self) -> Event | _NeedData:
        """The next event, or NEED_DATA. Raises ProtocolError/AuthenticationError on bad input."""
        while True:
            if self.state is State.CLOSED:
                return Closed("connection closed")
            if self._big is not None:
                big = self._big
                if not big.complete:
                    if self._eof:
                        return self._truncated()
                    return NEED_DATA
                self._big = None
                event = self._frame(big.kind, big.segments())
                if event is not None:
                    return event
                continue
            parsed = self._parse_small()
            if isinstance(parsed, _NeedData):
                if self._eof:
                    if len(self._buf) > self._pos:
                        return self._truncated()
                    self.state = State.CLOSED
                    return Closed(None)
                return NEED_DATA
            if parsed is None:
                continue  # a large frame was set up
            event = self._frame(parsed[0], parsed[1])
            if event is not None:
                return event

    def take_messages(self) -> list[list[bytes | bytearray | memoryview]]:
        """The segments of every complete small MESSAGE frame at the front of what was received:
        the fast path of an authenticated connection, one call per read instead of one
        :meth:`next_event` per frame. It stops at anything else (a handshake or ERROR frame, a
        frame at or over ``LARGE_FRAME`` or the size limit, an unfinished frame) and leaves it
        to :meth:`next_event`, which the caller asks next unless :meth:`idle` says nothing is left."""
        if self.state is not _AUTHENTICATED or self._big is not None:
            return []
        data = self._data
        buf: bytes | bytearray | memoryview = self._buf if data is None else data
        out, pos = _take(buf, self._pos, min(self.LARGE_FRAME - 1, self._max_message), self.MAX_SEGMENTS)
        end = len(buf)
        self._pos = pos
        if pos == end:
            if data is not None:
                self._data, self._pos = None, 0
            else:
                self._buf.clear()
                self._pos = 0
        return out

    def idle(self) -> bool:
        """Nothing received is left to parse (no bytes, no large frame, no end of stream):
        :meth:`next_event` would say NEED_DATA."""
        return self._data is None and not self._buf and self._big is None and not self._eof and self.state is not State.CLOSED

    def _truncated(self) -> Closed:
        self.state = State.CLOSED
        raise errors.ProtocolError("the peer closed the connection in the middle of a frame")

    def _parse_small(self) -> tuple[frames.Kind, list[bytes | bytearray | memoryview]] | _NeedData | None:
        data = self._data
        buf: bytes | bytearray | memoryview = self._buf if data is None else data
        pos = self._pos
        avail = len(buf) - pos
        if avail < frames.HEADER.size:
            return self._need_data()
        magic, version, kind_number, count, _ = frames.HEADER.unpack_from(buf, pos)
        if (kind_number == _MESSAGE and magic == frames.MAGIC and version == frames.VERSION
                and self.state is State.AUTHENTICATED and count <= self.MAX_SEGMENTS):
            kind = frames.Kind.MESSAGE  # the fast path: every frame after the handshake
        else:
            kind, count = frames.parse_header(buf, pos)
            self._check_kind(kind, count)
            if self.state is not State.AUTHENTICATED:
                self._peer_version = frames.header_field(buf, pos)
        head = frames.HEADER.size + count * frames.LENGTH.size
        if avail < head:
            return self._need_data()
        lengths = frames.head_struct(count).unpack_from(buf, pos)[5:]
        total = sum(lengths)  # flagged lengths (frames.READ_ONLY) make it huge: the large path
        if total >= self.LARGE_FRAME:
            self._start_large(kind, lengths, buf, pos + head)
            return None
        if total > self._max_message or self.state is not State.AUTHENTICATED:
            self._check_size(total)
        if avail < head + total:
            return self._need_data()
        at = pos + head
        segments: list[bytes | bytearray | memoryview] = []
        for n in lengths:
            segments.append(bytes(buf[at : at + n]))
            at += n
        self._pos = at
        if at == len(buf):  # the common case: the read held exactly this frame
            self._consumed()
        return kind, segments

    def _start_large(self, kind: frames.Kind, fields: Sequence[int], buf: bytes | bytearray | memoryview, body: int) -> None:
        """Set up the buffers of a large frame whose body starts at ``buf[body]``, and move the
        body bytes already read into them. Sizes are checked before anything is allocated."""
        if self.state is not State.AUTHENTICATED:
            self._check_size(sum(fields))  # a handshake frame is never large: this raises
        total = sum(frames.split_field(f)[0] for f in fields)
        self._check_size(total)
        big = receiving.LargeFrame(kind, fields)  # FrameTooLarge where a buffer cannot be allocated
        self._pos = body + big.feed(memoryview(buf)[body:])
        self._consumed()
        self._big = big

    def _need_data(self) -> _NeedData:
        """Keep the unfinished frame's bytes (they are the caller's until now) and ask for more."""
        if self._data is not None:
            self._spill()
        elif self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        return NEED_DATA

    def _spill(self) -> None:
        """Copy what is unread of the caller's buffer into our own."""
        assert self._data is not None
        self._buf += self._data[self._pos :]
        self._data, self._pos = None, 0

    def _consumed(self) -> None:
        """Drop what was read: all of the caller's buffer, or the read part of ours."""
        if self._data is not None:
            if self._pos == len(self._data):
                self._data, self._pos = None, 0
        elif self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    def _check_kind(self, kind: frames.Kind, count: int) -> None:
        if kind not in ACCEPTS[self.state]:
            raise errors.ProtocolError(f"unexpected {kind.name} frame in state {self.state.value}")
        if self.state is not State.AUTHENTICATED and count != 1:
            raise errors.ProtocolError("handshake frames have exactly one segment")
        if count > self.MAX_SEGMENTS:
            raise errors.ProtocolError(f"frame has {count} segments; at most {self.MAX_SEGMENTS} are accepted")

    def _check_size(self, total: int) -> None:
        limit = self._max_message if self.state is State.AUTHENTICATED else self.MAX_HANDSHAKE_FRAME
        if total > limit:
            raise errors.FrameTooLarge(
                f"frame of {total} bytes exceeds the limit of {limit} bytes in state {self.state.value}"
                + ("; raise PROCMESH_MAX_MESSAGE_BYTES on the receiving side if this is intended" if self.state is State.AUTHENTICATED else "")
            )

    def _frame(self, kind: frames.Kind, segments: list[bytes | bytearray | memoryview]) -> Event | None:
        if kind is frames.Kind.MESSAGE:
            return Message(segments)
        if kind is frames.Kind.ERROR:
            self.state = State.CLOSED
            return Closed(bytes(segments[0]).decode("utf-8", "replace"))
        return self._handshake(kind, bytes(segments[0]))
