"""Status write coalescing: what counts as a change of what the status says, the per-mesh
window for progress, and the reconcile that writes every condition change at once and the
progress it held back when the window ends.

Aspects: progress alone (counts, proc entries, messages) is not significant; a condition's
status, reason or observedGeneration, the phase, observedGeneration, restarts, a field of
Kueue's, the first status and any change of a Ready mesh are; the window lets one progress
write through and defers the next by what is left of it; a mesh starting under the fake API
has each of its condition changes written by the reconcile that computed it, with
observedGeneration, its progress at most once per window, and nothing held back for good.
"""

import asyncio
import copy

from mesh_client._src import contract
from procmesh_operator import coalescing, planning, reconciling, statuses

from .builders import mesh, mesh_body, pod
from .test_reconciling import MESH_PATH, NO_GANG, FakeClient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def starting(m, ready_ranks, bound_ranks):
    pods = {}
    for rank in range(m.size):
        bound = rank in bound_ranks
        pods[rank] = pod(m, rank, ready=rank in ready_ranks, phase="Running" if bound else "Pending",
                         node="n1" if bound else None, ip="127.0.1.1" if bound else None)
    return pods


def test_progress_alone_is_not_significant():
    m = mesh(per_host=(("procs", 4),))
    first = statuses.compute_status(m, None, starting(m, (), ()), planning.Plan())
    later = statuses.compute_status(m, first, starting(m, (0,), (0, 1)), planning.Plan())
    assert statuses.differs(first, later)
    assert later["readyProcs"] == 1 and later["procs"] != first["procs"]
    assert not coalescing.significant(first, later)


def test_what_the_status_says_is_significant():
    m = mesh(per_host=(("procs", 2),))
    base = statuses.compute_status(m, None, starting(m, (), ()), planning.Plan())
    assert coalescing.significant(None, base) and coalescing.significant({}, base)

    def changed(edit):
        new = copy.deepcopy(base)
        edit(new)
        return coalescing.significant(base, new)

    def condition(status, type_):
        return next(c for c in status["conditions"] if c["type"] == type_)

    assert changed(lambda s: condition(s, contract.SCHEDULED).update(reason="Unschedulable"))
    assert changed(lambda s: condition(s, contract.DEGRADED).update(status="True"))
    assert changed(lambda s: condition(s, contract.PROGRESSING).update(observedGeneration=2))
    assert changed(lambda s: s.update(phase="Failed"))
    assert changed(lambda s: s.update(observedGeneration=2))
    assert changed(lambda s: s.update(restarts=1))
    assert changed(lambda s: s.update(admission={"clusterQueue": "q"}))  # Kueue's, say
    assert changed(lambda s: s["conditions"].pop())  # a condition gone
    assert not changed(lambda s: condition(s, contract.READY).update(message="1 of 2 ready"))


def test_a_field_only_the_written_status_has_is_no_change():
    m = mesh(per_host=(("procs", 4),))
    first = statuses.compute_status(m, None, starting(m, (), ()), planning.Plan())
    first["renderedHostPlacement"] = contract.HOSTS_ON_ANY_NODES  # recorded by upgrading.py
    later = statuses.compute_status(m, first, starting(m, (0,), (0, 1)), planning.Plan())
    assert "renderedHostPlacement" not in later  # a merge patch of `later` leaves it as it is
    assert not coalescing.significant(first, later)  # so progress alone stays throttled


def test_any_change_of_a_ready_mesh_is_significant():
    m = mesh(per_host=(("procs", 2),))
    ready = statuses.compute_status(m, None, starting(m, (0, 1), (0, 1)), planning.Plan())
    moved = copy.deepcopy(ready)
    moved["procs"][1]["address"] = "127.0.9.9:26600"  # a client connects from this table
    assert coalescing.significant(ready, moved)
    assert coalescing.significant(moved, ready)


def test_the_window_lets_one_progress_write_through_per_mesh():
    clock = Clock()
    throttle = coalescing.StatusThrottle(5.0, clock)
    m = mesh(per_host=(("procs", 4),))
    old = statuses.compute_status(m, None, starting(m, (), ()), planning.Plan())
    new = statuses.compute_status(m, old, starting(m, (0,), (0,)), planning.Plan())
    key, other = ("ns", "m"), ("ns", "other")
    assert throttle.wait(key, old, new) == 0.0  # nothing written yet by this process
    throttle.wrote(key)
    clock.now += 2.0
    assert throttle.wait(key, old, new) == 3.0
    assert throttle.wait(other, old, new) == 0.0  # per mesh
    assert throttle.wait(key, None, new) == 0.0  # significant: never deferred
    clock.now += 3.0
    assert throttle.wait(key, old, new) == 0.0
    throttle.forget(key)
    assert len(throttle) == 0
    assert coalescing.StatusThrottle(0.0, clock).wait(key, old, new) == 0.0  # window off


def test_a_starting_mesh_has_every_condition_change_written_and_its_progress_throttled():
    clock = Clock()
    body = mesh_body("m", per_host=(("procs", 4),), generation=3)
    client = FakeClient({MESH_PATH: body})
    ctl = reconciling.Controller(client, NO_GANG)
    ctl._throttle = coalescing.StatusThrottle(5.0, clock)
    key = ("ns", "m")

    def states(status):
        return {c["type"]: (c["status"], c["reason"], c["observedGeneration"])
                for c in status["conditions"]}

    def step(ready, bound):
        """The pods move as a node runs them (their watch events), then a reconcile."""
        for rank in range(4):
            path = f"/api/v1/namespaces/ns/pods/m-{rank}"
            obj = client.objects[path]
            obj["spec"].pop("nodeName", None)
            if rank in bound:
                obj["spec"]["nodeName"] = "n1"
            obj["status"] = {"phase": "Running" if rank in bound else "Pending",
                             "podIP": "127.0.1.1" if rank in bound else None,
                             "conditions": [{"type": "Ready",
                                             "status": "True" if rank in ready else "False"}]}
            client._stamp(obj)
            ctl.pod_event("MODIFIED", copy.deepcopy(obj))
        before = len(patches())
        again = asyncio.run(ctl.reconcile(key))
        return len(patches()) > before, again

    def patches():
        return [p for verb, p in client.calls if verb == "patch" and p.endswith("/status")]

    asyncio.run(ctl.reconcile(key))  # creates the pods: the first status goes out at once
    written = [copy.deepcopy(client.objects[MESH_PATH]["status"])]
    # (the first write records the token Secret's name, before its Role and pods)
    assert len(patches()) == 2 and written[0]["observedGeneration"] == 3

    clock.now += 1.0
    wrote, again = step(ready=(), bound=(0,))  # progress only, inside the window: held back
    assert not wrote and again is not None and 0 < again <= 4.0
    assert client.objects[MESH_PATH]["status"] == written[0]

    clock.now += 1.0
    wrote, again = step(ready=(0,), bound=(0, 1))  # still progress: still held back
    assert not wrote and 0 < again <= 3.0

    clock.now += again  # the window ends: the reconcile it asked for writes the latest state
    wrote, _ = step(ready=(0,), bound=(0, 1))
    assert wrote and client.objects[MESH_PATH]["status"]["readyProcs"] == 1

    clock.now += 0.5  # every pod bound: Scheduled turns True, written inside the window
    wrote, _ = step(ready=(0,), bound=(0, 1, 2, 3))
    status = client.objects[MESH_PATH]["status"]
    assert wrote and states(status)[contract.SCHEDULED][0] == "True"

    clock.now += 0.5  # Ready, written at once, with every proc in it
    wrote, again = step(ready=(0, 1, 2, 3), bound=(0, 1, 2, 3))
    status = client.objects[MESH_PATH]["status"]
    assert wrote and status["phase"] == "Ready" and status["readyProcs"] == 4
    assert all(p["ready"] and p["address"] for p in status["procs"])
    assert all(g == 3 for _, _, g in states(status).values())
    assert again is None  # nothing held back

    clock.now += 0.5
    wrote, _ = step(ready=(0, 1, 2, 3), bound=(0, 1, 2, 3))  # nothing changed: no write
    assert not wrote
