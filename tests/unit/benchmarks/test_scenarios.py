"""The one fault-scenario registry: every scenario, kills included, behind one command line.

Aspects: faults.py's registry holds the flood (and flood-rounds), fail-fast, kill and broken-link scenarios (one registry, so
one ``--scenario``); a name registered twice is refused; the cluster is opened once, on first
use, and torn down with the run; nested figures flatten to dotted keys.
"""

import contextlib

import pytest

from benchmarks import faults, scenarios


def test_one_registry_and_one_parser_for_every_scenario():
    assert list(scenarios.SCENARIOS) == ["flood", "flood-nofile64", "flood-rounds", "call-fail-fast", "proc-kills",
                                         "operator-kills", "node-kills", "node-silences",
                                         "leader-failovers", "apiserver-restarts", "broken-link"]
    args = faults.parser().parse_args(["--scenario", "proc-kills", "--scenario", "flood",
                                       "--kills", "7", "--rounds", "3", "--json"])
    assert (args.scenario, args.kills, args.rounds, args.json) == (["proc-kills", "flood"], 7, 3, True)


def test_a_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        scenarios.scenario("flood", "again")(lambda ctx: {})


def test_the_cluster_opens_once_on_first_use_and_closes_with_the_run():
    events = []

    @contextlib.contextmanager
    def open_cluster():
        events.append("up")
        yield "env"
        events.append("down")

    with contextlib.ExitStack() as stack:
        ctx = scenarios.Context(faults.parser().parse_args([]), stack, open_cluster=open_cluster)
        assert events == []
        assert ctx.cluster() == "env" and ctx.cluster() == "env"
        assert events == ["up"]
    assert events == ["up", "down"]


def test_figures_flatten_to_dotted_keys():
    figures = {"RestartProc": {"back_to_ready_s": {"p99": 4.5}, "stuck": 0}, "log_tail": ["x"]}
    assert list(scenarios.flatten(figures)) == [("RestartProc.back_to_ready_s.p99", 4.5),
                                                ("RestartProc.stuck", 0)]
