"""The reconcile with gang placement on, against the fake API of test_reconciling.py.

Aspects: gate mode creates every pod gated and lifts the gate only when the whole mesh fits
(then from all pods), else reports Unschedulable and looks again; podgroup mode creates the
PodGroup before the pods, which name it; ``auto`` follows API discovery.
"""

import asyncio
import dataclasses

from mesh_client._src import contract
from procmesh_operator import ganging, kubeclient, reconciling

from .builders import SETTINGS, mesh_body
from .test_reconciling import MESH_PATH, FakeClient

PODS = kubeclient.pods_path("ns")


class ClusterFake(FakeClient):
    """The fake, plus cluster-wide lists of nodes and pods (as the fit check reads them)."""

    async def list(self, path, *, label_selector=None):
        if path == "/api/v1/pods":
            self.calls.append(("list", path))
            return {"metadata": {"resourceVersion": str(self.rv)},
                    "items": [o for p, o in self.objects.items() if "/pods/" in p]}
        return await super().list(path, label_selector=label_selector)


def gpu_node(units):
    return {"metadata": {"name": "gpu", "labels": {"nvidia.com/gpu.present": "true"}}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110",
                                       "nvidia.com/gpu": str(units)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def run(units, size, gang):
    body = mesh_body("m", per_host=(("gpus", size),), gpus={"mode": "plugin"})
    client = ClusterFake({MESH_PATH: body, "/api/v1/nodes/gpu": gpu_node(units)})
    ctl = reconciling.Controller(client, dataclasses.replace(SETTINGS, gang=gang))
    again = asyncio.run(ctl.reconcile(("ns", "m")))
    pods = {p: o for p, o in client.objects.items() if p.startswith(PODS + "/")}
    return client, ctl, pods, again


def scheduled(client):
    status = client.objects[MESH_PATH]["status"]
    return next(c for c in status["conditions"] if c["type"] == contract.SCHEDULED)


def test_gate_mode_lifts_the_gate_from_every_pod_when_the_mesh_fits():
    client, _, pods, _ = run(units=6, size=4, gang="gate")
    assert len(pods) == 4
    assert all(not o["spec"].get("schedulingGates") for o in pods.values())
    assert sorted(p for verb, p in client.calls if verb == "patch" and "/pods/" in p) == \
        sorted(pods)
    assert scheduled(client)["reason"] == ganging.SCHEDULING


def test_gate_mode_holds_every_pod_while_the_mesh_does_not_fit():
    client, ctl, pods, again = run(units=6, size=12, gang="gate")
    assert len(pods) == 12
    assert all(ganging.is_gated(o) for o in pods.values())
    assert not [p for verb, p in client.calls if verb == "patch" and "/pods/" in p]
    c = scheduled(client)
    assert (c["status"], c["reason"]) == ("False", ganging.UNSCHEDULABLE)
    assert "12 procs must be placed together and only 6 fit" in c["message"]
    assert again == reconciling.WAITING_RECHECK_SECONDS
    # Room frees elsewhere: a proc pod's deletion requeues the held mesh.
    assert ("ns", "m") in ctl._gated


def test_podgroup_mode_creates_the_group_before_the_pods_which_name_it():
    client, _, pods, _ = run(units=6, size=3, gang="podgroup")
    creates = [p for verb, p in client.calls if verb == "create" and "/events" not in p]
    group = ganging.pod_groups_path("ns")
    assert creates.index(group) < creates.index(PODS)
    assert client.objects[f"{group}/m-uid-m"]["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    assert all(o["spec"]["schedulingGroup"] == {"podGroupName": "m-uid-m"} for o in pods.values())
    assert all(not o["spec"].get("schedulingGates") for o in pods.values())


def test_auto_follows_discovery():
    body = mesh_body("m", per_host=(("gpus", 2),))
    client = ClusterFake({MESH_PATH: body, ganging.POD_GROUP_API: {
        "resources": [{"name": "podgroups"}]}})
    ctl = reconciling.Controller(client, SETTINGS)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert f"{ganging.pod_groups_path('ns')}/m-uid-m" in client.objects
    _, _, pods, _ = run(units=6, size=2, gang="auto")  # no discovery document: the gate
    assert pods and all("schedulingGroup" not in o["spec"] for o in pods.values())


def test_a_one_proc_mesh_is_neither_grouped_nor_gated():
    client, _, pods, _ = run(units=6, size=1, gang="podgroup")
    assert not [p for p in client.objects if "/podgroups/" in p]
    [only] = pods.values()
    assert "schedulingGroup" not in only["spec"] and not ganging.is_gated(only)


def stall(client, ctl, bound, unbound):
    """Make the released gang partly bound, the rest Unschedulable since long ago."""
    for rank in bound:
        client.objects[f"{PODS}/m-{rank}"]["spec"]["nodeName"] = "gpu"
    for rank in unbound:
        client.objects[f"{PODS}/m-{rank}"]["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    for path, obj in client.objects.items():
        if path.startswith(PODS + "/"):
            ctl.store.upsert(obj)


def test_a_stalled_release_is_recreated_behind_the_gate_and_backs_off():
    client, ctl, pods, _ = run(units=6, size=4, gang="gate")
    stall(client, ctl, bound=(0, 1), unbound=(2, 3))
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert sorted(p for verb, p in client.calls if verb == "delete") == sorted(pods)
    c = scheduled(client)
    assert c["reason"] == ganging.GANG_STALLED and "pod m-2 stayed unschedulable" in c["message"]
    # Recreated behind the gate; not released again before the back-off, though it fits.
    asyncio.run(ctl.reconcile(("ns", "m")))
    again = [o for p, o in client.objects.items() if p.startswith(PODS + "/")]
    assert len(again) == 4 and all(ganging.is_gated(o) for o in again)
    assert scheduled(client)["reason"] == ganging.GANG_STALLED
    assert "stall 1: released again after a 60 s back-off" in scheduled(client)["message"]
    assert "pod m-2 stayed unschedulable" in scheduled(client)["message"]


def test_a_proc_released_alone_never_takes_its_running_peers_down():
    client, ctl, pods, _ = run(units=6, size=4, gang="gate")
    ctl._released.clear()  # as after a RestartProc: only one pod was released this time
    stall(client, ctl, bound=(0, 1, 2), unbound=(3,))
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert not [p for verb, p in client.calls if verb == "delete"]


def test_stalled_needs_a_partly_bound_released_gang_past_the_wait():
    from .builders import mesh, pod

    m = mesh("m", per_host=(("gpus", 2),))
    waiting = pod(m, 1, node=None, phase="Pending", ready=False)
    waiting["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": "no room",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    t = 1767225600.0  # 2026-01-01T00:00:00Z
    assert ganging.stalled(m, {0: pod(m, 0), 1: waiting}, t + 61, 60) is not None
    assert ganging.stalled(m, {0: pod(m, 0), 1: waiting}, t + 59, 60) is None
    nothing_bound = pod(m, 0, node=None, phase="Pending", ready=False)
    assert ganging.stalled(m, {0: nothing_bound, 1: waiting}, t + 61, 60) is None
    assert ganging.stalled(m, {1: waiting}, t + 61, 60) is None  # not every pod exists
    gated = ganging.join(waiting, m, ganging.GATE)
    assert ganging.stalled(m, {0: pod(m, 0), 1: gated}, t + 61, 60) is None


def rejected(client, ctl, ranks):
    """The scheduler's word on these pods of the gang: PodScheduled=False, Unschedulable."""
    for rank in ranks:
        obj = client.objects[f"{PODS}/m-{rank}"]
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1000)
        obj["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "pod group is unschedulable",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        ctl.store.upsert(obj)


def test_podgroup_mode_reads_nothing_while_the_scheduler_rejected_no_pod():
    """A whole gang that waits (the scheduler's queue, its binding) is reconciled at every pod
    event and every recheck period; none of those reads its PodGroup or lists the cluster."""
    client, ctl, pods, _ = run(units=6, size=3, gang="podgroup")
    assert len(pods) == 3
    client.calls.clear()
    for _ in range(3):
        again = asyncio.run(ctl.reconcile(("ns", "m")))
        ctl._groups_read.clear()  # as if every pause had passed
    assert again == reconciling.WAITING_RECHECK_SECONDS  # still looked at until bound
    assert not [c for c in client.calls if c[0] in ("get", "list")]
    assert scheduled(client)["reason"] == ganging.SCHEDULING


def test_podgroup_mode_reads_a_rejected_group_once_per_recheck_period():
    """Once the scheduler rejected the gang's pods, its PodGroup (and the fit check that
    explains it) is read at the next reconcile, then after WAITING_RECHECK_SECONDS, then after
    twice that (doubling while it waits), not at every reconcile."""
    client, ctl, pods, _ = run(units=6, size=3, gang="podgroup")
    group = f"{ganging.pod_groups_path('ns')}/m-uid-m"
    assert len(pods) == 3
    reads = lambda: [p for verb, p in client.calls if verb == "get" and p == group]  # noqa: E731
    fits = lambda: [p for verb, p in client.calls if p == "/api/v1/pods"]  # noqa: E731
    assert not reads()
    rejected(client, ctl, range(3))
    for _ in range(3):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert len(reads()) == 1 and len(fits()) == 1
    assert scheduled(client)["reason"] == "Unschedulable"
    assert "pod group is unschedulable" in scheduled(client)["message"]
    when, count, body, why = ctl._groups_read[("ns", "m")]
    ctl._groups_read[("ns", "m")] = (when - reconciling.WAITING_RECHECK_SECONDS, count, body, why)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert len(reads()) == 2 and len(fits()) == 2
    # The pause doubles while the gang waits: one recheck period no longer suffices.
    when, count, body, why = ctl._groups_read[("ns", "m")]
    ctl._groups_read[("ns", "m")] = (when - reconciling.WAITING_RECHECK_SECONDS, count, body, why)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert len(reads()) == 2
    ctl._groups_read[("ns", "m")] = (when - 2 * reconciling.WAITING_RECHECK_SECONDS, count, body,
                                     why)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert len(reads()) == 3
