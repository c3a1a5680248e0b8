"""The per-thread cost figures of benchmarks/call_costs.py: snapshots of /proc become CPU and
context switches per call and per thread role, threads that ended or started between the two
snapshots counted by what they did in between."""

import importlib
import os
import pathlib
import threading
import types

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def call_costs(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports its sibling `actors`, as when run
    return importlib.import_module("call_costs")


def test_threads_are_grouped_by_role(call_costs: types.ModuleType) -> None:
    assert call_costs.role("MainThread") == "main"
    assert call_costs.role("procmesh-io") == "io"
    assert call_costs.role("actor-3-Echo") == "actor"
    assert call_costs.role("ThreadPoolExecutor-0_0") == "other"


def test_per_call_divides_each_roles_growth_over_processes_by_the_calls(call_costs: types.ModuleType) -> None:
    before = {1: {10: (1_000_000, 5, 1), 11: (0, 0, 0)}, 2: {20: (500_000, 2, 0)}}
    after = {1: {10: (3_000_000, 9, 3), 11: (400_000, 2, 0), 12: (600_000, 2, 2)}, 2: {20: (1_500_000, 4, 0)}}
    names = {10: "procmesh-io", 11: "actor-0-A", 12: "actor-1-B", 20: "procmesh-io"}
    got = call_costs.per_call(before, after, names, calls=2)
    # io: (2 ms + 1 ms) / 2 calls; switches (4 + 2) / 2 and (2 + 0) / 2.
    assert got["io"] == {"cpu_us": 1500.0, "voluntary_switches": 3.0, "involuntary_switches": 1.0}
    # actor: thread 11 grew by 0.4 ms, thread 12 started meanwhile with 0.6 ms.
    assert got["actor"] == {"cpu_us": 500.0, "voluntary_switches": 2.0, "involuntary_switches": 1.0}
    assert set(got) == {"io", "actor"}  # a role with nothing in between is left out


def test_thread_stats_reads_this_threads_cpu_as_it_grows(call_costs: types.ModuleType) -> None:
    tid = threading.get_native_id()
    first = call_costs.thread_stats(os.getpid())[tid]
    sum(i * i for i in range(200_000))  # some CPU on this thread
    second = call_costs.thread_stats(os.getpid())[tid]
    assert second[0] > first[0]
    assert second[1] >= first[1] and second[2] >= first[2]
