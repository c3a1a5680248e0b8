"""A bounded hostile-connection flood against a real proc server (benchmarks/faults.py runs the
full 10^5): memory stays bounded and the authenticated client is served throughout.

Aspects: 2,000 connections of every hostile kind (probes, garbage, oversized headers, wrong
tokens, idle ones held open) leave the proc's RSS, at peak and after, within 64 MiB of its
start, with no failed legitimate call and a bounded log; the same with RLIMIT_NOFILE=64 and 100
idle connections held at once.
"""

import pytest

from benchmarks import faults

MIB = 1 << 20
CONNECTIONS = 2000


@pytest.mark.parametrize("nofile, hold", [(None, 300), (64, 100)], ids=["unlimited", "nofile64"])
def test_a_flood_leaves_memory_bounded_and_the_client_served(nofile, hold):
    figures = faults.flood_figures(CONNECTIONS, nofile=nofile, hold=hold, baseline_calls=20, settle=1.0)
    assert figures["connections_attempted"] == CONNECTIONS
    assert figures["connections_made"] > CONNECTIONS // 2, figures
    assert figures["rss_peak_mib"] - figures["rss_before_mib"] < 64, figures
    assert figures["rss_after_mib"] - figures["rss_before_mib"] < 64, figures
    assert figures["legit_calls_failed"] == 0 and figures["legit_calls_during"] >= 1, figures
    # Per rate-limited log (refusals, drops, accept failures): one line, then one per 10 s.
    assert figures["log_lines"] <= 3 * (2 + figures["flood_seconds"] // 10), figures
