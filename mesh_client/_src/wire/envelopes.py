"""Requests and replies inside authenticated MESSAGE frames: the one place that encodes and
decodes them (sans-IO: segments in, typed values out).

A message is a list of segments. The first is the envelope; the others are the payload, which
this module never opens (the actor layer decodes it where the result is wanted, not on the I/O
thread). Envelopes are only ever read after authentication (see :mod:`.protocol`):

- a request's is ``call_id (u64) | op (u16)`` then the pickled tuple of the op's fields, so the
  handlers see ``(call_id, op, *fields)``;
- a reply's is ``call_id (u64) | status (u8)``, nothing else: no pickle on either side.

Per call, only the fixed part changes. A sender that sends the same fields again (every call of
one endpoint to one point of a slice) encodes them once (:func:`request_fields`), and the
receiver keeps the last few small field pickles it decoded (:data:`FIELDS_KEPT`), so neither
side pickles a header per call. Used by :mod:`mesh_client._src.runtime.peers` (client) and
:mod:`mesh_client._src.server`.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from mesh_client._src.wire import errors, native

Segment = bytes | bytearray | memoryview
Received = list[bytes | bytearray | memoryview]  # a message's segments as the wire hands them over (no copy)

# Reply status codes, the second field of a reply's envelope.
OK = 0
ERROR = 1
LOST = 2  # never sent: made locally when the connection dropped before the reply came

NO_REPLY = 0  # the call id of one-way messages (broadcast): nobody waits for a reply

REQUEST_HEAD = struct.Struct("!QH")  # call id, op; the pickled fields follow in the same segment
REPLY_HEAD = struct.Struct("!QB")  # call id, status: the whole envelope of a reply

# Field pickles at most this long are kept once decoded (a call's are ~70 bytes; a spawn's,
# which carries source files, is not kept), and at most this many of them (then all are dropped).
FIELDS_KEPT_BYTES = 256
FIELDS_KEPT = 512


class MalformedMessage(errors.ProtocolError):
    """An authenticated peer sent a message whose envelope is not a request or reply."""


# Named tuples, not dataclasses: one of each is made per message, on the I/O thread.
class Request(NamedTuple):
    call_id: int
    op: int
    header: tuple[Any, ...]  # the whole envelope (call_id, op, *fields), as the handlers index it
    payload: Received


class Reply(NamedTuple):
    call_id: int
    status: int
    payload: Received


# A named tuple made straight from its items: the class's own __new__ is a Python function
# (namedtuple builds it from source), a twentieth of a proc's time per pipelined call.
_new = tuple.__new__


def request_fields(fields: tuple[Any, ...]) -> bytes:
    """The encoded ``fields`` of a request, for :func:`encode_request_with` (encode once, send
    many times). Receivers treat decoded fields as read-only: equal bytes may share one tuple."""
    return pickle.dumps(fields, protocol=5)


def request_envelope(call_id: int, op: int, fields: bytes) -> bytes:
    """Segment 0 of a request whose fields were encoded by :func:`request_fields`."""
    return REQUEST_HEAD.pack(call_id, op) + fields


def encode_request(call_id: int, header: tuple[Any, ...], payload: Sequence[Segment]) -> list[Segment]:
    """The segments of request ``call_id`` with envelope fields ``header`` = ``(op, *fields)``."""
    return [REQUEST_HEAD.pack(call_id, header[0]) + pickle.dumps(header[1:], protocol=5), *payload]


_fields_seen: dict[bytes, tuple[Any, ...]] = {}
_unpack_request = REQUEST_HEAD.unpack_from  # looked up once: decode_request runs for every request
_REQUEST_FIXED = REQUEST_HEAD.size


def decode_request(segments: Received) -> Request:
    return Request._make(request_parts(segments))


def _request_parts_py(segments: Received) -> tuple[int, int, tuple[Any, ...], Received]:
    """:func:`request_parts` in Python: for installs without the C twin, and for what the twin
    hands over (fields not decoded lately, anything malformed), so the errors are these."""
    try:
        envelope = segments[0]
        call_id, op = _unpack_request(envelope)
        raw = envelope[_REQUEST_FIXED:]
        if type(raw) is not bytes:
            raw = bytes(raw)
        fields = _fields_seen.get(raw)
        if fields is None:
            fields = _decode_fields(raw)
    except MalformedMessage:
        raise
    except Exception as exc:
        raise MalformedMessage(f"a request envelope is call id (u64), op (u16), then a pickled tuple: {exc!r}") from None
    return call_id, op, (call_id, op) + fields, segments[1:]


#: :func:`decode_request` as a plain tuple ``(call_id, op, header, payload)``: the server's
#: reactor runs it for every request, and making the named tuple cost as much as the rest. In C
#: where built (``_frames.request_parts``, which looks up the fields kept here).
request_parts: Callable[[Received], tuple[int, int, tuple[Any, ...], Received]] = _request_parts_py
if native.frames is not None:
    native.frames.bind_requests(_fields_seen, _request_parts_py)
    request_parts = native.frames.request_parts


class _PlainValues(pickle.Unpickler):
    """Unpickles plain values only (tuples, lists, dicts, strings, numbers, None): a request's
    fields are decoded on the I/O thread, where a pickle that imports and calls something (a
    sleep stalled every connection; a SystemExit ended the thread) must never run."""

    def find_class(self, module: str, name: str) -> Any:
        raise MalformedMessage(f"a request's fields are plain values (tuples, strings, numbers); these "
                               f"name {module}.{name}")


def _decode_fields(raw: bytes) -> tuple[Any, ...]:
    """Unpickle fields not seen lately (and keep them if small)."""
    fields = _PlainValues(io.BytesIO(raw)).load()
    if type(fields) is not tuple:
        raise MalformedMessage(f"a request's fields are a pickled tuple, got {type(fields).__name__}")
    if len(raw) <= FIELDS_KEPT_BYTES:
        if len(_fields_seen) >= FIELDS_KEPT:
            _fields_seen.clear()
        _fields_seen[raw] = fields
    return fields


def encode_reply(call_id: int, status: int, payload: Sequence[Segment]) -> list[Segment]:
    return [REPLY_HEAD.pack(call_id, status), *payload]


def reply_status(segments: Sequence[Segment]) -> int:
    """The status of a reply's segments (as :func:`encode_reply` made them)."""
    return int(REPLY_HEAD.unpack_from(segments[0])[1])


_unpack_reply = REPLY_HEAD.unpack


def reply_head(segments: Received) -> tuple[int, int]:
    """``(call_id, status)`` of a reply's segments: :func:`decode_reply` without making the
    named tuple (the client's reactor runs it for every reply; the payload is ``segments[1:]``)."""
    try:
        call_id, status = _unpack_reply(segments[0])
        return call_id, status
    except Exception as exc:
        raise MalformedMessage(f"a reply envelope is 9 bytes, call id (u64) and status (u8): {exc!r}") from None


def decode_reply(segments: Received) -> Reply:
    try:
        call_id, status = REPLY_HEAD.unpack(segments[0])
    except Exception as exc:
        raise MalformedMessage(f"a reply envelope is 9 bytes, call id (u64) and status (u8): {exc!r}") from None
    return _new(Reply, (call_id, status, segments[1:]))
