"""Queued meshes under Kueue's real controller manager (issue 16, items 3-4 and their checks).

A ClusterQueue of 6 GPU units (plus cpu and memory) whose one ResourceFlavor is a node of 6
time-sliced units (2 GPUs x 3 replicas) that only this flavor's tolerations tolerate; each mesh
is labelled ``kueue.x-k8s.io/queue-name``, names no node, and becomes one Kueue Workload.

Aspects: the procs land on the node of the flavor they were admitted on, a pinned mesh's too
(the operator picks its node, and the flavor's toleration counts there); 4 + 4 + 6 procs queue in order (StrictFIFO) with no deadlock, a queued mesh has no pod
and says ``QuotaReserved=False`` with Kueue's message in its conditions, ``kubectl get pm``,
``kubectl describe`` and attach's error; a high-priority mesh preempts a low one, whose procs
go (the client's call fails naming the preemption) and which returns to Ready once the units
free up; a mesh suspended while Kueue is deactivating its Workload (its DeactivationTarget
written, spec.active not yet) stays deactivated by Kueue after its resume.
"""

from __future__ import annotations

import calendar
import time
import uuid
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from mesh_client.kubernetes import KubernetesHostMesh, MeshNotReady, attach
from procmesh_operator import settings, workloads
from tests.cluster import testing
from tests.cluster.kueue import configs, manager
from tests.cluster.process_node.config import NodeConfig
from tests.integration.local.actors import Lambda
from tests.integration.operator import gang_checks, support

pytestmark = pytest.mark.cluster

UNITS = 6


@pytest.fixture(scope="module")
def node_key(cluster):
    """(the 6-unit node's name, the label and taint key that only it has)."""
    key = f"procmesh.io/test-kueue-{uuid.uuid4().hex[:6]}"
    name = f"gpu-zz-kueue-{uuid.uuid4().hex[:6]}"
    cluster.add_node(NodeConfig(name, gpus=2, gpu_replicas=3, labels={key: "yes"},
                                taints=({"key": key, "value": "yes", "effect": "NoSchedule"},)))
    return name, key


@pytest.fixture(scope="module")
def place(node_key):
    """The meshes name no node: their ResourceFlavor does (its nodeLabels and tolerations)."""
    return gang_checks.Place(node_key[0], {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}})


@pytest.fixture
def queue(kueue, custom, namespace, node_key):
    """A LocalQueue in the test's namespace on a fresh 6-unit ClusterQueue whose one flavor is
    the 6-unit node; returns the LocalQueue's name."""
    cluster_queue = f"cq-{namespace}"
    flavor = f"flavor-{namespace}"
    key = node_key[1]
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "resourceflavors",
                                        configs.resource_flavor(flavor, {key: "yes"}, [
                                            {"key": key, "operator": "Exists", "effect": "NoSchedule"}]))
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "clusterqueues",
                                        configs.cluster_queue(cluster_queue, flavor, {
                                            "cpu": "10", "memory": "10Gi",
                                            "nvidia.com/gpu": str(UNITS)}))
    custom.create_namespaced_custom_object(configs.GROUP, configs.VERSION, namespace, "localqueues",
                                           configs.local_queue(namespace, "team", cluster_queue))
    yield "team"
    custom.delete_cluster_custom_object(configs.GROUP, configs.VERSION, "clusterqueues", cluster_queue)
    custom.delete_cluster_custom_object(configs.GROUP, configs.VERSION, "resourceflavors", flavor)


def create_queued(custom, namespace, name, procs, place, queue, spec=None, **template):
    body = support.mesh_manifest(name, perHost=[{"name": "gpus", "size": procs}],
                                 gpus={"mode": "plugin"}, template={**place.template, **template},
                                 **(spec or {}))
    body["metadata"]["labels"] = {workloads.QUEUE_NAME_LABEL: queue}
    return custom.create_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                                  namespace, support.contract.PLURAL, body)


def workload_of(custom, namespace, mesh):
    return custom.get_namespaced_custom_object(
        workloads.GROUP, workloads.VERSION, namespace, workloads.PLURAL,
        f"procmesh-{mesh['metadata']['name']}-{mesh['metadata']['uid'][:8]}")


def created_in_an_earlier_second(custom, namespace, mesh):
    """Wait until the mesh's Workload exists and the clock is past the second it was created
    in: Kueue orders by creation time, in whole seconds."""
    def done():
        try:
            stamp = workload_of(custom, namespace, mesh)["metadata"]["creationTimestamp"]
        except Exception:
            return None
        created = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
        return stamp if time.time() >= created + 1 else None
    testing.wait_for(done, f"the Workload of {mesh['metadata']['name']}, a second old")


def wait_reason(custom, namespace, name, type_, reason):
    def check():
        mesh = support.get_mesh(custom, namespace, name)
        return mesh if support.condition(mesh, type_).get("reason") == reason else None
    return testing.wait_for(check, f"{namespace}/{name} {type_} reason {reason}")


def test_meshes_queue_in_order_under_the_quota(cluster, operator, kueue, kube, custom, core,
                                               namespace, place, queue, node_key):
    sizes = {"four-a": 4, "four-b": 4, "six": 6}
    for name, procs in sizes.items():
        created_in_an_earlier_second(
            custom, namespace, create_queued(custom, namespace, name, procs, place, queue))
    support.wait_ready(custom, namespace, "four-a")
    pod = support.mesh_pods(core, namespace, "four-a")[0]
    assert node_key[1] in pod.spec.node_selector  # from the assigned ResourceFlavor
    assert pod.spec.node_name == place.node
    for name in ("four-b", "six"):
        wait_reason(custom, namespace, name, "Ready", "Queued")
        assert support.mesh_pods(core, namespace, name) == []  # queued: no pod at all
    # The head of the queue gets Kueue's verdict (StrictFIFO: the one behind it just waits).
    def told():
        mesh = support.get_mesh(custom, namespace, "four-b")
        return mesh if "insufficient" in support.condition(mesh, "Admitted").get("message", "") \
            else None
    mesh = testing.wait_for(told, "four-b told why by Kueue")
    admitted = support.condition(mesh, "Admitted")
    assert admitted["status"] == "False" and admitted["reason"] == "Pending"
    assert admitted["message"].startswith("QuotaReserved=False (Pending): "), admitted
    assert "nvidia.com/gpu" in admitted["message"], admitted
    table = support.kubectl(cluster, "get", "pm", "-n", namespace).stdout
    assert any(r.split()[0] == "four-b" and "Queued" in r for r in table.splitlines()), table
    described = support.kubectl(cluster, "describe", "pm", "four-b", "-n", namespace).stdout
    assert "QuotaReserved=False (Pending)" in described, described
    with pytest.raises(MeshNotReady) as info:
        attach("four-b", namespace, api_client=kube, timeout=4, progress=False)
    assert info.value.reason == "Queued" and "QuotaReserved=False" in str(info.value)

    order = []
    waiting = dict(sizes)
    while waiting:
        def one_ready():
            for name in waiting:
                if support.condition(support.get_mesh(custom, namespace, name),
                                     "Ready").get("status") == "True":
                    return name
            return None
        running = testing.wait_for(one_ready, f"one of {sorted(waiting)} Ready")
        order.append(running)
        del waiting[running]
        assert gang_checks.units_held(core, place) == sizes[running]  # on the flavor's node
        for name in waiting:  # Kueue admits no other: they have no pod
            assert support.mesh_pods(core, namespace, name) == [], f"{name} has pods beside {running}"
        custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                               namespace, support.contract.PLURAL, running)
        # Its units are free once its pods are gone (terminating pods still hold them).
        testing.wait_for(lambda gone=running: support.mesh_pods(core, namespace, gone) == [] or None,
                         f"the pods of {running} gone")
    assert order == ["four-a", "four-b", "six"]


def test_a_pinned_mesh_goes_to_the_tainted_node_its_flavor_tolerates(
        operator, kueue, custom, core, namespace, place, queue, node_key):
    """The operator picks a pinned mesh's node itself, skipping nodes whose taints its pods do
    not tolerate: the flavor's toleration, which the admission adds and spec.template lacks,
    counts (judged without it, the flavor's node would be refused and the mesh wait)."""
    body = support.mesh_manifest("pinned", perHost=[{"name": "gpus", "size": 2}],
                                 gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4},
                                 template=place.template)
    body["metadata"]["labels"] = {workloads.QUEUE_NAME_LABEL: queue}
    custom.create_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, body)
    mesh = support.wait_ready(custom, namespace, "pinned")
    assert "tolerations" not in mesh["spec"]["template"]
    assert [(p["node"], p["gpu"]) for p in mesh["status"]["procs"]] == [(place.node, "0"),
                                                                        (place.node, "1")]
    pod = support.mesh_pods(core, namespace, "pinned")[0]
    assert node_key[1] in {t.key for t in pod.spec.tolerations}  # from the flavor


def test_a_high_priority_mesh_preempts_a_low_one_which_comes_back(
        operator, kueue, kube, custom, core, namespace, place, queue, faults):
    gang_checks.priority_class(kube, "procmesh-kueue-low", 100)
    gang_checks.priority_class(kube, "procmesh-kueue-high", 1000)
    create_queued(custom, namespace, "low", 4, place, queue, priorityClassName="procmesh-kueue-low")
    support.wait_ready(custom, namespace, "low")
    mesh = attach("low", namespace, api_client=kube, timeout=120, progress=False)
    actors = mesh.spawn("lam", Lambda)
    assert actors.slice(gpus=0).run.call_one(lambda: 42).get() == 42

    create_queued(custom, namespace, "high", 4, place, queue, priorityClassName="procmesh-kueue-high")
    def preempted():  # Preempted while its procs stop; then queued again, saying so
        mesh = support.get_mesh(custom, namespace, "low")
        admitted = support.condition(mesh, "Admitted")
        return mesh if admitted.get("status") == "False" and \
            "Preempted to accommodate a workload" in admitted.get("message", "") else None
    testing.wait_for(preempted, "low preempted")
    support.wait_ready(custom, namespace, "high")
    testing.wait_for(lambda: support.mesh_pods(core, namespace, "low") == [] or None,
                     "the preempted mesh's pods gone")
    assert gang_checks.units_held(core, place) == 4  # only high's
    failures = faults.wait("lam")
    assert failures, "no call of the preempted mesh failed"
    report = failures[0].report()
    assert "is gone" in report, report
    assert "the mesh's Kueue workload is not admitted: " in report, report
    assert "Preempted to accommodate a workload" in report, report

    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, "high")
    back = support.wait_ready(custom, namespace, "low")
    assert support.condition(back, "Admitted")["status"] == "True"
    assert back["status"]["restarts"] == 0  # an eviction is no restart of the mesh's procs
    assert len(support.mesh_pods(core, namespace, "low")) == 4


def test_a_preempted_never_restarted_mesh_comes_back_and_its_client_is_told_so(
        operator, kueue, kube, custom, core, namespace, place, queue, faults):
    """An eviction is no proc failure: restartPolicy Never (or restarts used up) does not keep
    the mesh down, so the failed call must not say "spawn a new mesh"; respawn() brings the
    actors back once Kueue re-admits it."""
    gang_checks.priority_class(kube, "procmesh-kueue-low", 100)
    gang_checks.priority_class(kube, "procmesh-kueue-high", 1000)
    create_queued(custom, namespace, "low", 4, place, queue, spec={"restartPolicy": "Never"},
                  priorityClassName="procmesh-kueue-low")
    support.wait_ready(custom, namespace, "low")
    mesh = attach("low", namespace, api_client=kube, timeout=120, progress=False)
    actors = mesh.spawn("lam", Lambda)
    assert actors.slice(gpus=0).run.call_one(lambda: 1).get() == 1

    create_queued(custom, namespace, "high", 4, place, queue, priorityClassName="procmesh-kueue-high")
    failures = faults.wait("lam")
    assert failures, "no call of the preempted mesh failed"
    report = failures[0].report()
    assert "Preempted to accommodate a workload" in report, report
    assert "does not restart it" not in report, report
    assert "once Kueue admits the mesh again" in report, report
    support.wait_ready(custom, namespace, "high")
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, "high")
    assert mesh.respawn() == [0, 1, 2, 3]  # waits until Kueue re-admits it and it is Ready
    assert list(actors.run.call(lambda: 2).get().values()) == [2, 2, 2, 2]
    assert support.get_mesh(custom, namespace, "low")["status"]["restarts"] == 0
    mesh.stop()


def test_a_suspended_mesh_gives_its_quota_back_and_queues_again_on_resume(
        operator, kueue, custom, core, namespace, place, queue):
    create_queued(custom, namespace, "first", UNITS, place, queue)
    first = support.wait_ready(custom, namespace, "first")
    created_in_an_earlier_second(custom, namespace, first)
    create_queued(custom, namespace, "second", UNITS, place, queue)
    wait_reason(custom, namespace, "second", "Ready", "Queued")

    support.patch_mesh(custom, namespace, "first", {"suspend": True})
    support.wait_ready(custom, namespace, "second")  # first's Workload was deactivated
    first = support.get_mesh(custom, namespace, "first")
    assert support.condition(first, "Ready")["reason"] == "Suspended"  # the user's reason
    assert support.condition(first, "Admitted")["reason"] == "Deactivated"
    assert support.mesh_pods(core, namespace, "first") == []

    support.patch_mesh(custom, namespace, "first", {"suspend": False})
    wait_reason(custom, namespace, "first", "Ready", "Queued")  # back in line, no pod
    assert support.mesh_pods(core, namespace, "first") == []
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, "second")
    support.wait_ready(custom, namespace, "first")


def test_a_workload_released_by_an_older_operator_is_queued_again_once_active(
        operator, kueue, custom, core, namespace, place, queue):
    """An operator before this one released a Workload that Kueue deactivated with its derived
    reason in Requeued=False (``DeactivatedDueTo...``), after which Kueue v0.17 takes no
    activation as one: activated, it stayed out of its queue for good. This operator rewrites
    that reason of an active Workload to ``Deactivated``, so that Kueue queues it again."""
    create_queued(custom, namespace, "older", UNITS, place, queue)
    older = support.wait_ready(custom, namespace, "older")
    support.patch_mesh(custom, namespace, "older", {"suspend": True})

    def released():
        w = workload_of(custom, namespace, older)
        requeued = {c["type"]: c for c in w["status"].get("conditions") or []}.get("Requeued", {})
        return w if requeued.get("reason") == "Deactivated" and "admission" not in w["status"] \
            and not support.mesh_pods(core, namespace, "older") else None
    testing.wait_for(released, "older's Workload released, its procs gone")

    def rewritten():
        """What the older release wrote (and no mark of a suspend, which it did not make); a
        write of Kueue's in between fails this one (409), which is tried again."""
        w = workload_of(custom, namespace, older)
        for c in w["status"]["conditions"]:
            if c["type"] == "Requeued":
                c["reason"] = "DeactivatedDueToRequeuingLimitExceeded"
        try:
            custom.patch_namespaced_custom_object_status(
                workloads.GROUP, workloads.VERSION, namespace, workloads.PLURAL,
                w["metadata"]["name"], {"metadata": {"resourceVersion": w["metadata"]["resourceVersion"]},
                                        "status": {"conditions": w["status"]["conditions"]}})
        except ApiException as e:
            if e.status == 409:
                return None
            raise
        return True
    testing.wait_for(rewritten, "older's Requeued reason as an older operator wrote it")
    custom.patch_namespaced_custom_object(
        workloads.GROUP, workloads.VERSION, namespace, workloads.PLURAL,
        workload_of(custom, namespace, older)["metadata"]["name"],
        {"metadata": {"annotations": {workloads.SUSPENDED_ANNOTATION: None}}})

    support.patch_mesh(custom, namespace, "older", {"suspend": False})
    support.wait_ready(custom, namespace, "older")


def test_a_workload_deleted_under_a_running_mesh_stops_it_and_it_queues_behind_the_waiting(
        cluster, operator, kueue, custom, core, namespace, place, queue):
    """Deleting the Workload takes the mesh's quota away: its procs stop (as Kueue stops a Job
    whose Workload is deleted) and it queues again behind the mesh that was waiting, instead
    of running on, re-admitted ahead of it."""
    create_queued(custom, namespace, "first", 4, place, queue)
    first = support.wait_ready(custom, namespace, "first")
    created_in_an_earlier_second(custom, namespace, first)
    waiting = create_queued(custom, namespace, "waiting", 4, place, queue)
    wait_reason(custom, namespace, "waiting", "Ready", "Queued")
    created_in_an_earlier_second(custom, namespace, waiting)
    old = workload_of(custom, namespace, first)["metadata"]["uid"]
    custom.delete_namespaced_custom_object(workloads.GROUP, workloads.VERSION, namespace,
                                           workloads.PLURAL, f"procmesh-first-{first['metadata']['uid'][:8]}")
    def settled():  # the waiting mesh runs, or first got a new Workload admitted (and ran on)
        if support.condition(support.get_mesh(custom, namespace, "waiting"),
                             "Ready").get("status") == "True":
            return "waiting"
        try:
            new = workload_of(custom, namespace, first)
        except Exception:
            return None
        admitted = workloads.read(new).state == workloads.STATE_ADMITTED
        return "first" if new["metadata"]["uid"] != old and admitted else None
    assert testing.wait_for(settled, "waiting Ready, or first re-admitted") == "waiting"
    mesh = support.get_mesh(custom, namespace, "first")
    assert support.condition(mesh, "Admitted")["status"] == "False", mesh["status"]
    assert [p for p in support.mesh_pods(core, namespace, "first")
            if p.metadata.deletion_timestamp is None] == []
    described = support.kubectl(cluster, "describe", "pm", "first", "-n", namespace).stdout
    assert "WorkloadDeleted" in described and "was deleted while its procs ran" in described, described
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, "waiting")
    back = support.wait_ready(custom, namespace, "first")
    assert back["status"]["restarts"] == 0


def reconciles(operator):
    """How many reconciles the operator has finished (its histogram's count)."""
    for line in operator.metrics().splitlines():
        if line.startswith("procmesh_reconcile_duration_seconds_count"):
            return float(line.split()[-1])
    return 0.0


def test_a_queued_mesh_is_not_rewritten_by_each_reconcile(operator, kueue, custom, namespace,
                                                          place, queue):
    """A mesh waiting for quota writes its status once, not on every look (its Progressing
    transition time moved each time, so each reconcile of each queued mesh wrote)."""
    first = create_queued(custom, namespace, "first", UNITS, place, queue)
    support.wait_ready(custom, namespace, "first")
    created_in_an_earlier_second(custom, namespace, first)
    second = create_queued(custom, namespace, "second", 2, place, queue)
    def told():
        mesh = support.get_mesh(custom, namespace, "second")
        return mesh if "insufficient" in support.condition(mesh, "Admitted").get("message", "") \
            else None
    before = testing.wait_for(told, "second told why by Kueue")
    # Past the operator's status throttle since its last write: a rewrite is not deferred.
    last = max(calendar.timegm(time.strptime(f["time"], "%Y-%m-%dT%H:%M:%SZ"))
               for f in before["metadata"]["managedFields"] if f.get("subresource") == "status")
    testing.wait_for(lambda: time.time() > last + settings.Settings().status_progress_seconds + 1
                     or None, "the status throttle's window over")
    name = f"procmesh-second-{second['metadata']['uid'][:8]}"
    for touch in range(3):  # each change of its Workload makes the operator look at it again
        count = reconciles(operator)
        custom.patch_namespaced_custom_object(workloads.GROUP, workloads.VERSION, namespace,
                                              workloads.PLURAL, name,
                                              {"metadata": {"labels": {"probe-touch": str(touch)}}})
        testing.wait_for(lambda count=count: reconciles(operator) > count or None,
                         "a reconcile after the touch")
    after = support.get_mesh(custom, namespace, "second")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], \
        (before["status"]["conditions"], after["status"]["conditions"])


def test_a_queued_meshs_template_edit_is_what_kueue_admits_it_for(
        operator, kueue, custom, core, namespace, place, queue):
    """Its Workload follows the template while it holds no quota: 2 procs raised to 6 cpu each
    do not fit the queue's 10 cpu, so Kueue must not admit them on the 10m they asked before."""
    create_queued(custom, namespace, "first", UNITS, place, queue)
    first = support.wait_ready(custom, namespace, "first")
    created_in_an_earlier_second(custom, namespace, first)
    second = create_queued(custom, namespace, "second", 2, place, queue)
    wait_reason(custom, namespace, "second", "Ready", "Queued")
    support.patch_mesh(custom, namespace, "second", {"template": {
        **place.template, "resources": {"requests": {"cpu": "6", "memory": "32Mi"}}}})
    def updated():
        pod_set = workload_of(custom, namespace, second)["spec"]["podSets"][0]
        requests = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]
        return requests if requests["cpu"] == "6" else None
    testing.wait_for(updated, "second's Workload asking 6 cpu a proc")
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION,
                                           namespace, support.contract.PLURAL, "first")
    def told():  # the GPU units are free now: cpu is what keeps it out
        mesh = support.get_mesh(custom, namespace, "second")
        admitted = support.condition(mesh, "Admitted")
        return mesh if admitted.get("status") == "True" or \
            "for cpu" in admitted.get("message", "") else None
    mesh = testing.wait_for(told, "Kueue's verdict on second")
    assert support.condition(mesh, "Admitted")["status"] == "False", mesh["status"]
    assert support.mesh_pods(core, namespace, "second") == []
    support.patch_mesh(custom, namespace, "second", {"template": {
        **place.template, "resources": {"requests": {"cpu": "1", "memory": "32Mi"}}}})
    support.wait_ready(custom, namespace, "second")  # fits now
    assert all(p.spec.containers[0].resources.requests["cpu"] == "1"
               for p in support.mesh_pods(core, namespace, "second"))


def test_the_python_client_spawns_through_a_queue(operator, kueue, kube, custom, namespace,
                                                  place, queue):
    hosts = KubernetesHostMesh(namespace=namespace, api_client=kube, queue=queue,
                               template=place.template, timeout=120)
    procs = hosts.spawn_procs(per_host={"gpus": 2}, gpus="plugin", name="spawned")
    try:
        mesh = support.get_mesh(custom, namespace, "spawned")
        assert mesh["metadata"]["labels"][workloads.QUEUE_NAME_LABEL] == queue
        assert support.condition(mesh, "Admitted")["status"] == "True"
        assert workload_of(custom, namespace, mesh)["spec"]["podSets"][0]["count"] == 2
        actors = procs.spawn("lam", Lambda)
        assert list(actors.run.call(lambda: 1).get().values()) == [1, 1]
    finally:
        procs.stop().get()


def test_a_suspend_while_kueue_deactivates_the_workload_leaves_it_kueues(
        cluster, operator, kueue, custom, core, namespace, place, queue):
    """Kueue deactivates a Workload in two writes: ``DeactivationTarget=True`` in its status
    (at waitForPodsReady's requeuing limit, a rejected admission check, a maximum execution
    time), then ``spec.active: false`` with an update of its own. A mesh suspended in between
    (a moment, or as long as Kueue is down) had the operator write ``spec.active: false`` as
    its suspend's, marked so: Kueue's write then changed nothing, and the resume activated
    the Workload Kueue had decided to deactivate. The operator leaves that write to Kueue."""
    create_queued(custom, namespace, "doomed", 2, place, queue)
    mesh = support.wait_ready(custom, namespace, "doomed")
    with manager.stopped(cluster, kueue):
        def targeted():
            """Kueue's first write (workload.SetDeactivationTarget), as at its requeuing limit."""
            w = workload_of(custom, namespace, mesh)
            conditions = [c for c in w["status"]["conditions"] if c["type"] != workloads.DEACTIVATION_TARGET]
            conditions.append({"type": workloads.DEACTIVATION_TARGET, "status": "True",
                               "reason": "RequeuingLimitExceeded",
                               "message": "exceeding the maximum number of re-queuing retries",
                               "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "observedGeneration": w["metadata"]["generation"]})
            try:
                custom.patch_namespaced_custom_object_status(
                    workloads.GROUP, workloads.VERSION, namespace, workloads.PLURAL, w["metadata"]["name"],
                    {"metadata": {"resourceVersion": w["metadata"]["resourceVersion"]},
                     "status": {"conditions": conditions}})
            except ApiException as e:
                if e.status == 409:  # the operator wrote it meanwhile (PodsReady)
                    return None
                raise
            return True
        testing.wait_for(targeted, "doomed's Workload a deactivation target, as Kueue marks it")
        support.patch_mesh(custom, namespace, "doomed", {"suspend": True})
        wait_reason(custom, namespace, "doomed", "Ready", "Suspended")  # its suspend reconciled
        workload = workload_of(custom, namespace, mesh)
        assert workload["spec"]["active"] is True, workload["metadata"]  # left to Kueue's own write
        assert workloads.SUSPENDED_ANNOTATION not in (workload["metadata"].get("annotations") or {})
    testing.wait_for(lambda: workload_of(custom, namespace, mesh)["spec"]["active"] is False,
                     "Kueue, started again, deactivating doomed's Workload")
    support.patch_mesh(custom, namespace, "doomed", {"suspend": False})

    def told() -> dict[str, Any] | None:
        """Evicted first (its quota released), then deactivated by Kueue, as the mesh says."""
        admitted = support.condition(support.get_mesh(custom, namespace, "doomed"), "Admitted")
        return admitted if admitted.get("reason") == "DeactivatedDueToRequeuingLimitExceeded" \
            and "Kueue deactivated the mesh's Workload" in admitted.get("message", "") else None
    testing.wait_for(told, "doomed resumed, its Workload left deactivated by Kueue")
    assert workload_of(custom, namespace, mesh)["spec"]["active"] is False
    assert support.mesh_pods(core, namespace, "doomed") == []
