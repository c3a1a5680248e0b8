"""benchmarks/idle_calls.py: what a call adds around a step is the whole call less the seconds
the step reports from inside, and the raw server does the same work as the actor."""

import importlib
import math
import pathlib
import time
import types

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def idle_calls(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports its sibling `actors`, as when run
    return importlib.import_module("idle_calls")


@pytest.mark.parametrize("kind", ["spin", "sleep"])
def test_work_lasts_at_least_its_milliseconds(idle_calls: types.ModuleType, kind: str) -> None:
    assert idle_calls.work(kind, 2.0) >= 0.002
    assert idle_calls.work(kind, 0.0) >= 0.0


def test_added_counts_only_what_the_inside_did_not_report(idle_calls: types.ModuleType) -> None:
    def hidden_sleep() -> float:
        time.sleep(0.002)  # reported as no time inside: all of it is added
        return 0.0

    assert idle_calls.added_us(hidden_sleep, 3) >= 2000

    def reported_sleep() -> float:
        start = time.perf_counter()
        time.sleep(0.002)
        return time.perf_counter() - start + 1.0  # claims a second more than the call took

    assert idle_calls.added_us(reported_sleep, 3) < 0


def test_raw_server_answers_every_kind_and_step(idle_calls: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_calls, "STEPS_MS", (0.0, 1.0))
    got = idle_calls.raw_figures(2)
    assert set(got) == {"spin_0ms", "spin_1ms", "sleep_0ms", "sleep_1ms"}
    assert all(math.isfinite(v) for v in got.values())
