"""Runs in the procs of test_tracing: a tracer provider that records spans, and actors that
report what it recorded (the module global of their own proc)."""

import asyncio
import contextlib

from opentelemetry import trace

from mesh_client import Actor, endpoint

SPANS: list[tuple[str, str, dict]] = []  # (start | end, span name, attributes)


class RecordingTracer(trace.NoOpTracer):
    @contextlib.contextmanager
    def start_as_current_span(self, name, context=None, kind=trace.SpanKind.INTERNAL, attributes=None, **_):
        SPANS.append(("start", name, dict(attributes or {})))
        try:
            yield trace.INVALID_SPAN
        finally:
            SPANS.append(("end", name, {}))


class RecordingProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return RecordingTracer()


def install_recording_provider():
    trace.set_tracer_provider(RecordingProvider())


class Traced(Actor):
    @endpoint
    def work(self):
        return list(SPANS)  # what was recorded while this call runs

    @endpoint(instrument=False)
    def quiet(self):
        return list(SPANS)

    @endpoint
    def spans(self):
        return list(SPANS)


class AsyncTraced(Actor):
    @endpoint
    async def work(self):
        await asyncio.sleep(0)
        return list(SPANS)

    @endpoint(instrument=False)
    async def quiet(self):
        return list(SPANS)

    @endpoint
    async def spans(self):
        return list(SPANS)
