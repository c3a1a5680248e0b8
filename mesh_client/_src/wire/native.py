"""The wire's optional C module: the per-message work of :mod:`.protocol`, :mod:`.envelopes` and
:mod:`.packing` (``_frames.c``), or None where it was not built (no C compiler at install: their
Python twins, which stay, do the same work at more CPU per message)."""

from __future__ import annotations

from types import ModuleType

frames: ModuleType | None
try:
    from mesh_client._src.wire import _frames as frames
except ImportError:
    frames = None
