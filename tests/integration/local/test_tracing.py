"""``@endpoint(instrument=...)``: Monarch's tracing spans, made through OpenTelemetry.

Aspects: an instrumented endpoint (the default), sync or async, runs inside a span named for
the method, with the actor as attributes, once a tracer provider is set in the proc;
``instrument=False`` makes none; a proc without a provider does not even load OpenTelemetry.
"""

import pytest

from mesh_client import this_host
from tests.integration.local import tracing
from tests.integration.local.actors import Recorder


@pytest.fixture(scope="module")
def traced_procs():
    with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=tracing.install_recording_provider, name="traced") as mesh:
        yield mesh


@pytest.mark.parametrize("cls", [tracing.Traced, tracing.AsyncTraced])
def test_an_instrumented_endpoint_runs_inside_a_span_named_for_it(traced_procs, cls):
    actor = traced_procs.spawn(f"traced-{cls.__name__}", cls)
    before = len(actor.spans.call_one().get()) + 1  # that call's own end came after it returned
    during = actor.work.call_one().get()[before:]
    assert [(event, name) for event, name, _ in during] == [("start", "work")]
    attributes = during[0][2]
    assert cls.__name__ in attributes["procmesh.actor"] and attributes["procmesh.actor_id"].startswith(f"traced-{cls.__name__}")
    actor.quiet.call_one().get()
    after = actor.spans.call_one().get()[before:]
    assert [(event, name) for event, name, _ in after] == [("start", "work"), ("end", "work"), ("start", "spans")]


def test_a_proc_without_a_tracer_provider_loads_no_opentelemetry(procs):
    one = procs.slice(hosts=0, gpus=0)
    assert one.spawn("untraced", Recorder).echo.call_one("x").get() == "x"
    # By value (a lambda): a function of this module would import it, and OpenTelemetry with it.
    assert one.run(lambda: "opentelemetry.trace" in __import__("sys").modules).get() == [False]
