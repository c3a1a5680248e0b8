"""Chaos: many proc kills, per restart policy, and not one restart may stall.

Issue 12 item 1: a DELETE response handled after the pod's DELETED event left a "terminating"
pod in the operator's cache that no later event removed, so the restart never finished (2 of 39
kills). Here several meshes lose a proc at the same moment, round after round, so the operator
handles deletes and watch events of different meshes interleaved. It runs with the periodic
relist effectively off (--resync-seconds 3600): only the event path can bring a mesh back, and a
stalled restart fails the test instead of being healed by the next relist.
``PROCMESH_CHAOS_KILLS`` sets the kills per policy (default 20).
"""

import os
import random

import pytest

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

KILLS = int(os.environ.get("PROCMESH_CHAOS_KILLS", "20"))
MESHES = 2  # killed together, one proc each per round
SIZE = 3


@pytest.fixture
def eventful_operator(operator):
    """The session operator, restarted without resync for this test, restored afterwards; with
    a short restart back-off (each rank is killed again and again within minutes: a crash
    loop to the operator), so that restarts after a back-off come from the queue's requeue
    alone, and the test does not wait minutes."""
    with support.session_operator_with(operator, "--resync-seconds", "3600",
                                       "--restart-backoff-seconds", "0.5",
                                       "--restart-backoff-max-seconds", "1") as restarted:
        yield restarted


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_every_killed_proc_comes_back(eventful_operator, namespace, custom, core, policy):
    names = [f"chaos-{i}" for i in range(MESHES)]
    rounds = -(-KILLS // MESHES)
    for name in names:
        support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": SIZE}],
                            restartPolicy=policy, maxRestarts=rounds)
    meshes = {name: support.wait_ready(custom, namespace, name) for name in names}
    tokens = {name: support.token(core, namespace, name) for name in names}
    choose = random.Random(f"{policy}-{KILLS}")  # reproducible ranks
    for kill in range(1, rounds + 1):
        ranks = {name: choose.randrange(SIZE) for name in names}
        for name, rank in ranks.items():
            support.kill_proc(meshes[name]["status"]["procs"][rank]["address"], tokens[name])
        for name, rank in ranks.items():
            def back(name: str = name, expected: int = kill) -> dict | None:
                m = support.get_mesh(custom, namespace, name)
                ready = support.condition(m, "Ready").get("status") == "True"
                return m if ready and m["status"]["restarts"] == expected else None

            meshes[name] = testing.wait_for(
                back, f"{policy}: round {kill} of {rounds}, {name} rank {rank} restarted and "
                      f"Ready again")
    for name in names:
        pods = support.mesh_pods(core, namespace, name)
        assert sorted(p.metadata.name for p in pods) == [f"{name}-{r}" for r in range(SIZE)]
        assert not [p for p in pods if p.metadata.deletion_timestamp]
        assert meshes[name]["status"]["readyProcs"] == SIZE
