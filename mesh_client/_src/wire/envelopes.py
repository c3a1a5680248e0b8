"""Requests and replies inside authenticated MESSAGE frames: the one place that encodes and
decodes them (sans-IO: segments in, typed values out).

A message is a list of segments. The first is the envelope, a pickled tuple (it is only ever
read after authentication, see :mod:`.protocol`): ``(call_id, op, *fields)`` for a request,
``(call_id, status)`` for a reply. The other segments are the payload, which this module never
opens (the actor layer decodes it where the result is wanted, not on the I/O thread).
Used by :mod:`mesh_client._src.runtime.peers` (client) and :mod:`mesh_client._src.server`.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any, NamedTuple

from mesh_client._src.wire import errors

Segment = bytes | bytearray | memoryview
Received = list[bytes | bytearray | memoryview]  # a message's segments as the wire hands them over (no copy)

# Reply status codes, the second field of a reply's envelope.
OK = 0
ERROR = 1
LOST = 2  # never sent: made locally when the connection dropped before the reply came

NO_REPLY = 0  # the call id of one-way messages (broadcast): nobody waits for a reply


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
    header: tuple[Any, ...]  # the whole envelope, for callers that keep it


def encode_request(call_id: int, header: tuple[Any, ...], payload: Sequence[Segment]) -> list[Segment]:
    """The segments of request ``call_id`` with envelope fields ``header`` = ``(op, *fields)``."""
    return [pickle.dumps((call_id, *header), protocol=5), *payload]


def decode_request(segments: Received) -> Request:
    try:
        header = pickle.loads(segments[0])
        call_id, op = header[0], header[1]
    except Exception as exc:
        raise MalformedMessage(f"a request envelope is a pickled (call_id, op, ...) tuple: {exc!r}") from None
    if type(header) is not tuple or type(op) is not int:
        raise MalformedMessage(f"a request envelope is a (call_id, op, ...) tuple, got {type(header).__name__}")
    return Request(call_id, op, header, segments[1:])


def encode_reply(call_id: int, status: int, payload: Sequence[Segment]) -> list[Segment]:
    return [pickle.dumps((call_id, status), protocol=5), *payload]


def decode_reply(segments: Received) -> Reply:
    try:
        header = pickle.loads(segments[0])
        call_id, status = header
    except Exception as exc:
        raise MalformedMessage(f"a reply envelope is a pickled (call_id, status) pair: {exc!r}") from None
    return Reply(call_id, status, segments[1:], header)
