"""Monarch's telemetry helpers, ``span``, ``traced`` and ``get_meter``, over OpenTelemetry.

Monarch records them in its own tracing backend. Ours is the one ``@endpoint(instrument=True)``
uses (:mod:`.tracing`): the tracer provider that the program set in the process
(``opentelemetry.trace.set_tracer_provider``, in a proc's ``bootstrap`` for instance). A span
names the running actor in its attributes, as an endpoint's span does; without a provider, or
without ``opentelemetry-api`` loaded, nothing is recorded, as OpenTelemetry itself does without
one. ``get_meter`` is the meter of the program's meter provider (OpenTelemetry's no-op meter
until one is set).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar, overload

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.server import tracing

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def span(name: str) -> Iterator[Any]:
    """A span named ``name`` around the block, made in the current actor (the OpenTelemetry span,
    or None when the process records none)."""
    tracer = tracing.tracer()
    if tracer is None:
        yield None
        return
    instance = ctx_mod.context().actor_instance
    attributes = {"procmesh.actor": instance.display, "procmesh.actor_id": instance.actor_id}
    with tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


@overload
def traced(fn: Callable[P, R]) -> Callable[P, R]: ...


@overload
def traced(*, name: str) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def traced(fn: Callable[P, R] | None = None, *, name: str | None = None) -> Any:
    """Run each call of ``fn`` (sync or async) inside :func:`span`, named ``name`` or for ``fn``."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        span_name = name if name is not None else fn.__name__
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                with span(span_name):
                    return await fn(*args, **kwargs)

            return run_async  # type: ignore[return-value]  # the same signature, async

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with span(span_name):
                return fn(*args, **kwargs)

        return run

    return decorate(fn) if fn is not None else decorate


def get_meter() -> Any:
    """The OpenTelemetry meter ``procmesh`` of this process's meter provider."""
    try:
        from opentelemetry import metrics
    except ImportError:
        raise ImportError("get_meter needs OpenTelemetry's API in this process: pip install opentelemetry-api") from None
    return metrics.get_meter(tracing.TRACER_NAME)
