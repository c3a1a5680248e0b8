"""Tree fan-out on the Kubernetes backend: forwarders in pods reach their children by pod address.

Aspects: a tree-routed call() on a mesh of pods returns every rank's value in rank order and
the same results as the flat loop, errors included; a 1 MiB value travels up a level of
forwarders intact; a forwarder pod's proc killed mid-call fails the call at once with
SupervisionError naming that proc, while the other actors are still busy.

The tree is forced on a small actor mesh (``tree_fanout_min=1``, k=2, at its spawn): 4 procs in 2 pods' hosts;
the controller sends to ranks 0 and 1, rank 0 forwards to 2 and 3.
"""

import os
import re
import signal

import pytest

from mesh_client import ActorError, SupervisionError, options
from mesh_client._src.actor import trees
from mesh_client._src.runtime.identifying import identify_proc
from mesh_client.kubernetes import attach
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import create_mesh

pytestmark = pytest.mark.cluster

WAIT = 60.0  # a bound on every get(): a hang fails the test instead of the session
SURVIVOR_SLEEP = 600.0  # far longer than WAIT: an answer means nobody waited for the survivors


def test_a_tree_of_pods_gives_the_flat_results_and_fails_fast_on_a_dead_forwarder(kube, custom, namespace, operator, faults, monkeypatch):
    create_mesh(custom, namespace, "tree", hosts=2, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("tree", namespace, api_client=kube, timeout=120)
    monkeypatch.setattr(options, "tree_fanout_min", 0)
    flat_rec = mesh.spawn("flat", Recorder)  # a mesh's route is fixed at its spawn
    monkeypatch.setattr(options, "tree_fanout_min", 1)
    monkeypatch.setattr(options, "tree_branching", 2)
    rec = mesh.spawn("rec", Recorder)
    assert (trees.branching(flat_rec), trees.branching(rec)) == (0, 2)
    rec.initialized.get(timeout=WAIT)

    def outcomes(rec) -> list:
        where = rec.where.call().get(timeout=WAIT)
        got = [
            [(dict(p), (v["message_rank"], v["pid"])) for p, v in where.items()],
            [(dict(p), v) for p, v in rec.slice(gpus=1).echo.call("x").get(timeout=WAIT).items()],
            rec.slice(hosts=1, gpus=1).where.call_one().get(timeout=WAIT)["pid"],
        ]
        with pytest.raises(ActorError) as info:
            rec.fail.call("boom").get(timeout=WAIT)
        return [*got, re.sub(r"(flat|rec)\.fail|tree\[hosts=\d,gpus=\d\] \(pod tree-\d\)", "N", str(info.value))]

    flat = outcomes(flat_rec)
    assert len({pid for _, (_, pid) in flat[0]}) == 4
    assert outcomes(rec) == flat

    blob = os.urandom(1 << 20)  # from ranks 2 and 3, through forwarder 0
    echoed = rec.slice(hosts=1).echo.call(blob).get(timeout=WAIT)
    assert [v == blob for v in echoed.values()] == [True, True]

    pid = identify_proc(mesh._group.addresses[0], mesh._group.token)["pid"]
    pending = rec.sleep.call(SURVIVOR_SLEEP)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SupervisionError) as info:
        pending.get(timeout=WAIT)
    assert mesh._group.displays[0] in str(info.value) and "Endpoint call rec.sleep() failed" in str(info.value)
    with pytest.raises(SupervisionError, match=re.escape(mesh._group.displays[0])):
        rec.slice(hosts=1, gpus=1).echo.call_one(1).get(timeout=WAIT)  # below the dead forwarder
    mesh.stop().get(timeout=WAIT)
