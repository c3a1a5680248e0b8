"""Requests and replies packed straight into MESSAGE frames: the small-message fast path.

:mod:`.envelopes` makes a message's segments and :mod:`.frames` puts a frame header in front
of them: two packs, a concatenation and a list per message. The envelope's fixed part (call id
and op, or call id and status) directly follows the frame's segment lengths, so one struct
covers both: the frame header, every length, and the envelope's fixed part, in one ``pack``.
The bytes are the same as the two steps give (``tests/unit/wire/test_packing.py`` checks them
against each other); only the work per message differs. Where :mod:`.native` was built, the
common shapes are packed in C, the same bytes again. Used by
:mod:`mesh_client._src.runtime.peers` (requests) and :mod:`mesh_client._src.server.actors`
(replies), which hand the pieces to ``Channel.send_frame``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from mesh_client._src.wire import envelopes, frames, native

Pieces = list[bytes | bytearray | memoryview]

_MAGIC, _VERSION, _MESSAGE = frames.MAGIC, frames.VERSION, int(frames.Kind.MESSAGE)
_SMALL = frames.FLAGGED_FROM  # a bytes segment under this is its own length field
_REQUEST_FIXED = envelopes.REQUEST_HEAD.size  # call id (u64), op (u16)
_REPLY_FIXED = envelopes.REPLY_HEAD.size  # call id (u64), status (u8): the whole envelope

# Frame header, the envelope's length, one payload segment's length, the envelope's fixed part.
_REQUEST_ONE = struct.Struct("!2sBBHHQQQH")
_REPLY_ONE = struct.Struct("!2sBBHHQQQB")
_REPLY_NONE = struct.Struct("!2sBBHHQQB")  # a reply without payload (one segment)
_requests: dict[int, struct.Struct] = {}  # payload segment count -> the struct of that shape
_replies: dict[int, struct.Struct] = {}


def _shape(cache: dict[int, struct.Struct], count: int, fixed: str) -> struct.Struct:
    st = cache.get(count)
    if st is None:
        st = cache[count] = struct.Struct(f"!2sBBHH{count + 1}Q{fixed}")
    return st


def _lengths(payload: Sequence[bytes | bytearray | memoryview]) -> list[int]:
    # A loop, not a comprehension: this runs per message, and a comprehension's frame costs more.
    out = []
    for s in payload:
        if type(s) is bytes:
            n = len(s)
            out.append(n if n < _SMALL else frames._field(s))
        else:
            out.append(frames._field(s))
    return out


def _request_frame_py(call_id: int, op: int, fields: bytes, payload: Sequence[bytes | bytearray | memoryview]) -> Pieces:
    """The pieces of the MESSAGE frame of request ``call_id`` (its envelope being
    :func:`envelopes.request_envelope` of ``op`` and ``fields``), ready for ``sendmsg``: equal,
    joined, to ``frames.encode(MESSAGE, [request_envelope(call_id, op, fields), *payload])``.
    The segments are not copied."""
    envelope = _REQUEST_FIXED + len(fields)
    if len(payload) == 1:
        p = payload[0]
        if type(p) is bytes and len(p) < _SMALL:  # every call without large buffers
            return [_REQUEST_ONE.pack(_MAGIC, _VERSION, _MESSAGE, 2, 0, envelope, len(p), call_id, op), fields, p]
    count = len(payload)
    st = _requests.get(count) or _shape(_requests, count, "QH")
    return [st.pack(_MAGIC, _VERSION, _MESSAGE, count + 1, 0, envelope, *_lengths(payload), call_id, op), fields, *payload]


def _reply_frame_py(call_id: int, status: int, payload: Sequence[bytes | bytearray | memoryview]) -> Pieces:
    """The pieces of the MESSAGE frame of a reply: equal, joined, to
    ``frames.encode(MESSAGE, envelopes.encode_reply(call_id, status, payload))``."""
    count = len(payload)
    if count == 1:
        p = payload[0]
        if type(p) is bytes and len(p) < _SMALL:  # every result without large buffers
            return [_REPLY_ONE.pack(_MAGIC, _VERSION, _MESSAGE, 2, 0, _REPLY_FIXED, len(p), call_id, status), p]
    elif count == 0:
        return [_REPLY_NONE.pack(_MAGIC, _VERSION, _MESSAGE, 1, 0, _REPLY_FIXED, call_id, status)]
    st = _replies.get(count) or _shape(_replies, count, "QB")
    return [st.pack(_MAGIC, _VERSION, _MESSAGE, count + 1, 0, _REPLY_FIXED, *_lengths(payload), call_id, status), *payload]


#: The pieces of the MESSAGE frame of request ``call_id`` (:func:`_request_frame_py`), and of a
#: reply (:func:`_reply_frame_py`): in C where built (``_frames.c``, the Python twins doing the
#: shapes it leaves, the same bytes either way).
request_frame: Callable[[int, int, bytes, Sequence[bytes | bytearray | memoryview]], Pieces] = _request_frame_py
reply_frame: Callable[[int, int, Sequence[bytes | bytearray | memoryview]], Pieces] = _reply_frame_py
if native.frames is not None:
    native.frames.bind_frames(_request_frame_py, _reply_frame_py)
    request_frame, reply_frame = native.frames.request_frame, native.frames.reply_frame
