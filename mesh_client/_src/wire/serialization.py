"""Pickling for the wire: cloudpickle with pickle protocol 5, large buffers out of band.

Out-of-band buffers become their own frame segments, so a numpy array or a large ``bytes`` is
handed to ``sendmsg`` as is instead of being copied into the pickle stream. Only ever called on
messages of an authenticated connection (see :mod:`.protocol`).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import cloudpickle

# bytes at least this large travel out of band instead of inside the pickle stream.
OUT_OF_BAND_BYTES = 64 * 1024


def _rebuild_bytes(buffer: Any) -> bytes:
    return bytes(buffer)


class _Pickler(cloudpickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is bytes and len(obj) >= OUT_OF_BAND_BYTES:
            return _rebuild_bytes, (pickle.PickleBuffer(obj),)
        return super().reducer_override(obj)


def dumps(obj: Any) -> list[bytes | memoryview]:
    """``[pickle stream, buffer, buffer, ...]``; the buffers are views, not copies."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return [out.getbuffer(), *(b.raw() for b in buffers)]


def loads(segments: list[bytes | memoryview]) -> Any:
    """Inverse of :func:`dumps`."""
    return pickle.loads(segments[0], buffers=segments[1:])
