"""Requests and replies inside authenticated MESSAGE frames: the one place that encodes and
decodes them (sans-IO: segments in, typed values out).

A message is a list of segments. The first is the envelope, a pickled tuple (it is only ever
read after authentication, see :mod:`.protocol`): ``(call_id, op, *fields)`` for a request,
``(call_id, status)`` for a reply. The other segments are the payload, which this module never
opens (the actor layer decodes it where the result is wanted, not on the I/O thread).
Used by :mod:`mesh_client._src.runtime.peers` (client) and :mod:`mesh_client._src.server`.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from typing import Any

from mesh_client._src.wire import errors

Segment = bytes | bytearray | memoryview

# Reply status codes, the second field of a reply's envelope.
OK = 0
ERROR = 1
LOST = 2  # never sent: made locally when the connection dropped before the reply came

NO_REPLY = 0  # the call id of one-way messages (broadcast): nobody waits for a reply


class MalformedMessage(errors.ProtocolError):
    """An authenticated peer sent a message whose envelope is not a request or reply."""


@dataclasses.dataclass(frozen=True)
class Request:
    """``header`` is the whole envelope ``(call_id, op, *fields)``, as the handlers index it."""

    header: tuple[Any, ...]
    payload: list[Any]

    @property
    def call_id(self) -> int:
        return int(self.header[0])

    @property
    def op(self) -> int:
        return int(self.header[1])


@dataclasses.dataclass(frozen=True)
class Reply:
    call_id: int
    status: int
    payload: list[Any]
    header: tuple[Any, ...]  # the whole envelope, for callers that keep it


def encode_request(call_id: int, header: tuple[Any, ...], payload: Sequence[Segment]) -> list[Segment]:
    """The segments of request ``call_id`` with envelope fields ``header`` = ``(op, *fields)``."""
    return [pickle.dumps((call_id, *header), protocol=5), *payload]


def decode_request(segments: Sequence[Any]) -> Request:
    header = _envelope(segments, "request")
    if len(header) < 2 or not isinstance(header[1], int):
        raise MalformedMessage(f"a request envelope is (call_id, op, ...), got {len(header)} fields")
    return Request(header, list(segments[1:]))


def encode_reply(call_id: int, status: int, payload: Sequence[Segment]) -> list[Segment]:
    return [pickle.dumps((call_id, status), protocol=5), *payload]


def decode_reply(segments: Sequence[Any]) -> Reply:
    header = _envelope(segments, "reply")
    if len(header) < 2 or not isinstance(header[1], int):
        raise MalformedMessage(f"a reply envelope is (call_id, status), got {len(header)} fields")
    return Reply(header[0], header[1], list(segments[1:]), header)


def _envelope(segments: Sequence[Any], what: str) -> tuple[Any, ...]:
    if not segments:
        raise MalformedMessage(f"an empty message where a {what} was expected")
    try:
        header = pickle.loads(segments[0])
    except Exception as exc:
        raise MalformedMessage(f"the {what} envelope does not unpickle: {exc!r}") from None
    if type(header) is not tuple or not header or not isinstance(header[0], int):
        raise MalformedMessage(f"the {what} envelope is not a tuple starting with a call id")
    return header
