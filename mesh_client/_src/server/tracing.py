"""Tracing spans around endpoint invocations, as Monarch's ``@endpoint(instrument=True)``.

Monarch wraps each invocation of an instrumented endpoint (the default) in a span named for the
method, for its own tracing backend. Ours is OpenTelemetry's: :func:`span` opens a span named
for the method, with the actor's display and id as attributes, through the tracer provider
that the program set in the proc (``opentelemetry.trace.set_tracer_provider``, in a
``bootstrap`` for instance). Without one, or without ``opentelemetry-api`` loaded in the proc,
:func:`tracer` is None and an invocation costs a dictionary lookup. Used by :mod:`.actors`
around sync calls and inside the actor's event loop around async ones.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

TRACER_NAME = "procmesh"
OPENTELEMETRY = "opentelemetry.trace"  # the module that has to be loaded for any tracing to happen


def tracer() -> Any | None:
    """The OpenTelemetry tracer to use, or None when the proc has no tracer provider."""
    trace: Any = sys.modules.get(OPENTELEMETRY)  # loaded only by a program that uses it
    if trace is None or isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # no provider set: OpenTelemetry would make a non-recording span anyway
    return trace.get_tracer(TRACER_NAME)


@contextlib.contextmanager
def span(tracer: Any, method: str, actor_display: str, actor_id: str) -> Iterator[None]:
    """A span named ``method`` around the block, made by ``tracer``."""
    attributes = {"procmesh.actor": actor_display, "procmesh.actor_id": actor_id}
    with tracer.start_as_current_span(method, attributes=attributes):
        yield
