"""Pickling for the wire: cloudpickle with pickle protocol 5, large buffers out of band.

Out-of-band buffers become their own frame segments, so a numpy array or a large ``bytes`` or
``bytearray`` is handed to ``sendmsg`` as is instead of being copied into the pickle stream. On
the receiving side each large segment arrives as its own ``bytes`` or ``bytearray`` object
(:mod:`.receiving`), which :func:`loads` hands to the unpickler as the buffer: a ``bytes`` or
``bytearray`` argument is then that very object, and a numpy array or a torch CPU tensor
(:mod:`.tensors`) is a view of it, with no copy. Only ever called on messages of an authenticated connection (see :mod:`.protocol`).

Code pickled by value (a class or function of the controller's ``__main__``) keeps its
``co_filename``, which cloudpickle replaces with ``<dynamic-code>``: remote tracebacks then name
the user's file, and :mod:`mesh_client._src.actor.sources` ships that file's text for their lines.
"""

from __future__ import annotations

import io
import pickle
import types
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle

from mesh_client._src.wire import tensors

# bytes at least this large travel out of band instead of inside the pickle stream.
OUT_OF_BAND_BYTES = 64 * 1024


class _OutOfBand:
    """Carries a large ``bytes`` as a pickle-5 buffer; it unpickles as plain ``bytes``."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> Any:
        return bytes, (pickle.PickleBuffer(self.data),)


def _bytearray(buffer: Any) -> bytearray:
    """Unpickle an out-of-band bytearray: the received segment itself when it is one (no copy)."""
    return buffer if type(buffer) is bytearray else bytearray(buffer)


class _OutOfBandArray:
    """Carries a large ``bytearray`` as a pickle-5 buffer (pickle puts bytearrays in the stream)."""

    __slots__ = ("data",)

    def __init__(self, data: bytearray) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> Any:
        return _bytearray, (pickle.PickleBuffer(self.data),)


def _ndarray(buffer: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    """Unpickle an array of :class:`_OutOfBandNdarray`: a view of the received buffer."""
    import numpy

    return numpy.frombuffer(buffer, dtype=dtype).reshape(shape)


class _OutOfBandNdarray:
    """Carries a large C-contiguous numpy array of a built-in dtype as a buffer, its dtype's
    string and its shape: what numpy's own reduce sends, at a third of its cost to pickle and
    unpickle (numpy pickles the dtype object and a tuple of flags)."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> Any:
        return _ndarray, (pickle.PickleBuffer(self.data), self.data.dtype.str, self.data.shape)


def _lean_array(obj: Any) -> bool:
    """A numpy array that :class:`_OutOfBandNdarray` carries exactly (anything else: numpy's reduce)."""
    dtype = obj.dtype
    return bool(dtype.isbuiltin == 1 and not dtype.hasobject and obj.flags.c_contiguous
                and obj.nbytes >= OUT_OF_BAND_BYTES)


def _lift(obj: Any, depth: int = 2, done: dict[int, Any] | None = None) -> Any:
    """Wrap large bytes, bytearrays and numpy arrays near the top of ``obj`` (the pickler never
    asks about bytes and bytearrays; arrays get a leaner reduce than numpy's).

    ``done`` maps the id of each object already replaced to its replacement, so an object met
    twice is replaced by one object and pickle's memo keeps the sharing (``f(buf, buf)`` sends
    ``buf`` once and the receiver gets one object twice, as with plain pickle)."""
    kind = type(obj)
    if kind is bytes or kind is bytearray:
        if len(obj) < OUT_OF_BAND_BYTES:
            return obj
    elif kind.__name__ == "ndarray" and kind.__module__ == "numpy":
        if not _lean_array(obj):
            return obj
    elif depth == 0 or not (kind is tuple or kind is list or kind is dict):
        return obj
    if done is None:
        done = {}
    found = done.get(id(obj))
    if found is not None:
        return found
    if kind is bytes:
        new: Any = _OutOfBand(obj)
    elif kind is bytearray:
        new = _OutOfBandArray(obj)
    elif kind is not tuple and kind is not list and kind is not dict:
        new = _OutOfBandNdarray(obj)
    elif kind is dict:
        new = {key: _lift(value, depth - 1, done) for key, value in obj.items()}
    else:
        new = kind(_lift(item, depth - 1, done) for item in obj)
    done[id(obj)] = new
    return new


_PLAIN_ATOMS = (type(None), bool, int, float, str)


def _plain(obj: Any, depth: int = 3) -> bool:
    """Small data that the standard pickler handles exactly like cloudpickle (no code, no classes)."""
    kind = type(obj)
    if kind in _PLAIN_ATOMS or (kind is bytes and len(obj) < OUT_OF_BAND_BYTES):
        return True
    if depth == 0:
        return False
    # Loops, not all(generator): this runs for every call's arguments and result.
    if kind is tuple or kind is list:
        if len(obj) > 16:
            return False
        for item in obj:
            if not _plain(item, depth - 1):
                return False
        return True
    if kind is dict:
        if len(obj) > 16:
            return False
        for k, v in obj.items():
            if type(k) is not str or not _plain(v, depth - 1):
                return False
        return True
    return False


# What _buffered found: nothing the standard pickler can take alone, plain data with buffers,
# or plain data with torch tensors too (those need tensors.reduce, see _TensorPickler).
_NO, _BUFFERS, _TENSORS = 0, 1, 2


def _buffered(obj: Any, depth: int = 2) -> int:
    """Whether ``obj`` is plain data (see :func:`_plain`) with large ``bytes``/``bytearray``,
    numpy arrays of a built-in dtype or torch tensors where :func:`_lift` looks: the standard
    pickler sends them out of band just as cloudpickle would, at a fraction of its cost."""
    kind = type(obj)
    if kind is bytes or kind is bytearray or kind in _PLAIN_ATOMS:
        return _BUFFERS
    if kind.__name__ == "ndarray" and kind.__module__ == "numpy":  # object arrays hold anything
        return _BUFFERS if obj.dtype.isbuiltin == 1 and not obj.dtype.hasobject else _NO
    if kind.__name__ == "Tensor" and kind.__module__ == "torch":  # exactly torch.Tensor
        return _TENSORS
    if depth == 0:
        return _BUFFERS if _plain(obj) else _NO  # below where _lift looks: plain data only
    found = _BUFFERS
    if kind is tuple or kind is list:
        if len(obj) > 16:
            return _NO
        for item in obj:
            inner = _buffered(item, depth - 1)
            if inner == _NO:
                return _NO
            found = max(found, inner)
        return found
    if kind is dict:
        if len(obj) > 16:
            return _NO
        for k, v in obj.items():
            inner = _buffered(v, depth - 1) if type(k) is str else _NO
            if inner == _NO:
                return _NO
            found = max(found, inner)
        return found
    return _NO


class _TensorPickler(pickle.Pickler):
    """The standard pickler, with plain torch tensors out of band (:mod:`.tensors`)."""

    def reducer_override(self, obj: Any) -> Any:
        return tensors.reduce(obj) or NotImplemented


_CODE_REDUCE: Callable[[types.CodeType], tuple[Any, tuple[Any, ...]]] = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _code(make: Callable[..., types.CodeType], args: tuple[Any, ...], filename: str) -> types.CodeType:
    """Rebuild a code object as cloudpickle does, under the file name it had where it was made."""
    return make(*args).replace(co_filename=filename)


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle is untyped
    """cloudpickle's, keeping each by-value code object's file name (and noting it in ``code_files``)."""

    def __init__(self, out: io.BytesIO, buffers: list[pickle.PickleBuffer], code_files: set[str] | None) -> None:
        super().__init__(out, protocol=5, buffer_callback=buffers.append)
        self.code_files = code_files

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.CodeType:
            if self.code_files is not None:
                self.code_files.add(obj.co_filename)
            make, args = _CODE_REDUCE(obj)
            return _code, (make, args, obj.co_filename)
        return tensors.reduce(obj) or super().reducer_override(obj)


_NONE = pickle.dumps(None, protocol=5)
_NO_ARGUMENTS_PICKLE = pickle.dumps(((), {}), protocol=5)
#: The one segment of the ``(args, kwargs)`` of a call without arguments: a receiver that
#: compares equal to it may skip unpickling (``((), {})``).
NO_ARGUMENTS = _NO_ARGUMENTS_PICKLE


def dumps(obj: Any, code_files: set[str] | None = None) -> list[bytes | memoryview]:
    """``[pickle stream, buffer, buffer, ...]``; the buffers are views, not copies.
    ``code_files`` gets the file name of every code object pickled by value."""
    if obj is None:  # a result of None
        return [_NONE]
    if type(obj) is tuple and len(obj) == 2 and type(obj[0]) is tuple and not obj[0] and type(obj[1]) is dict and not obj[1]:
        return [_NO_ARGUMENTS_PICKLE]  # the (args, kwargs) of a call without arguments
    if _plain(obj):  # the fast path for small arguments and results (a third of the cost)
        return [pickle.dumps(obj, protocol=5)]
    buffers: list[pickle.PickleBuffer] = []
    found = _buffered(obj)
    if found == _BUFFERS:  # large buffers in plain containers: the standard pickler, out of band
        stream = pickle.dumps(_lift(obj), protocol=5, buffer_callback=buffers.append)
        return [stream, *(b.raw() for b in buffers)]
    out = io.BytesIO()
    if found == _TENSORS:
        _TensorPickler(out, protocol=5, buffer_callback=buffers.append).dump(_lift(obj))
        return [out.getbuffer(), *(b.raw() for b in buffers)]
    _Pickler(out, buffers, code_files).dump(_lift(obj))
    return [out.getbuffer(), *(b.raw() for b in buffers)]


def loads(segments: Sequence[bytes | bytearray | memoryview]) -> Any:
    """Inverse of :func:`dumps`. The out-of-band segments become (part of) the result as they are."""
    return pickle.loads(segments[0], buffers=segments[1:])
