"""Monarch's span, traced and get_meter, over OpenTelemetry.

Aspects: with a tracer provider set, ``span`` opens a span of that name naming the current actor
(the client here), and ``traced`` wraps each call of a sync or async function in one, named for
the function or as told; without a provider nothing is recorded and the block still runs;
``get_meter`` is the meter of the program's provider.
"""

import asyncio
import contextlib

import pytest
from opentelemetry import metrics, trace

from mesh_client import get_meter, span, traced

SPANS: list[tuple[str, dict]] = []


class Recording(trace.NoOpTracer):
    @contextlib.contextmanager
    def start_as_current_span(self, name, context=None, kind=trace.SpanKind.INTERNAL, attributes=None, **_):
        SPANS.append((name, dict(attributes or {})))
        yield trace.INVALID_SPAN


class Provider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return Recording()


@pytest.fixture
def recording(monkeypatch):
    SPANS.clear()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: Provider())
    monkeypatch.setattr(trace, "get_tracer", lambda *a, **k: Recording())
    return SPANS


def test_span_names_the_block_and_the_actor(recording):
    with span("load"):
        pass
    assert recording == [("load", {"procmesh.actor": "<root>", "procmesh.actor_id": "client"})]


def test_traced_wraps_sync_and_async_calls(recording):
    @traced
    def step(x):
        return x + 1

    @traced(name="fetch")
    async def get(x):
        return x * 2

    assert step(1) == 2 and asyncio.run(get(2)) == 4
    assert [name for name, _ in recording] == ["step", "fetch"]
    assert step.__name__ == "step"


def test_without_a_provider_nothing_is_recorded():
    SPANS.clear()
    with span("quiet") as current:
        ran = True
    assert ran and current is None and SPANS == []


def test_get_meter_is_the_programs():
    meter = get_meter()
    assert isinstance(meter, metrics.Meter)
    meter.create_counter("steps").add(1)
