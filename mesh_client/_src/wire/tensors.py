"""Torch CPU tensors as pickle-5 out-of-band buffers, received without a copy.

Torch pickles a tensor's storage through ``torch.save`` into a ``bytes`` inside the pickle
stream (about 1 ms for 1 MiB, with two copies on each side). :mod:`.serialization` asks
:func:`reduce` first: a plain tensor (exactly ``torch.Tensor``, on the CPU, strided and
contiguous, covering its whole storage, no autograd, conjugate, negative or name bits) travels
as its bytes, a dtype and a shape; the receiver's tensor is a view of the frame's receive buffer
(:mod:`.receiving`), as numpy arrays are. Anything else is left to torch's own pickling, which
also keeps storage shared between views. torch is never imported here: a tensor can only be
pickled where torch is already loaded, and :func:`rebuild` runs where it is unpickled.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

# Smaller tensors take torch's own path (its fixed cost matters less than its generality).
OUT_OF_BAND_BYTES = 64 * 1024


def reduce(obj: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """``(rebuild, args)`` for a plain CPU tensor of at least OUT_OF_BAND_BYTES, else None."""
    kind = type(obj)
    if kind.__name__ != "Tensor" or kind.__module__ != "torch":
        return None
    torch = sys.modules["torch"]
    if kind is not torch.Tensor or obj.device.type != "cpu" or obj.layout is not torch.strided:
        return None
    nbytes = obj.numel() * obj.element_size()
    if (nbytes < OUT_OF_BAND_BYTES or obj.requires_grad or not obj.is_contiguous() or obj.storage_offset()
            or obj.untyped_storage().nbytes() != nbytes or obj.is_quantized or obj.is_conj() or obj.is_neg()
            or any(name is not None for name in getattr(obj, "names", ()))):
        return None
    flat = obj.reshape(-1).view(torch.uint8).numpy()  # the tensor's memory, as a buffer
    return rebuild, (pickle.PickleBuffer(flat), obj.dtype, tuple(obj.shape))


def rebuild(buffer: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
    """The tensor of :func:`reduce`: a view of ``buffer`` (the received bytearray), no copy."""
    import torch

    if not isinstance(buffer, bytearray):  # not straight from a receive buffer: own a copy
        buffer = bytearray(buffer)
    return torch.frombuffer(buffer, dtype=torch.uint8).view(dtype).reshape(shape)
