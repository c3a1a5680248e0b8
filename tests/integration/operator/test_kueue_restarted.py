"""The harness's restart of the session's Kueue with another Configuration
(:func:`tests.cluster.kueue.manager.restarted`, as test_kueue_pods_ready's module uses it).

Aspect: a Kueue that fails to start with the other Configuration (here one it refuses; on a
loaded machine, one not ready within the start timeout) leaves the session's Kueue running
again. The session's Kueue was stopped first, and the fixture's restore ran only once the other
one had started: every later Kueue test of the process met no Kueue, each failing on its own
wait for an admission.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.kueue import manager

pytestmark = pytest.mark.cluster


def test_a_kueue_that_fails_to_start_leaves_the_sessions_kueue_running(cluster: Any, kueue: Any) -> None:
    with pytest.raises(RuntimeError, match="kueue exited while starting"):
        with manager.restarted(cluster, kueue, wait_for_pods_ready={"timeout": "-1s"}):  # refused: negative
            pytest.fail("Kueue started with a negative waitForPodsReady.timeout")
    assert kueue.running(), "the session's Kueue was left stopped"
