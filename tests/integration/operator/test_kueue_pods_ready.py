"""Queued meshes under a Kueue whose Configuration enables ``waitForPodsReady``: the operator
keeps each mesh's Workload's ``PodsReady`` condition, as Kueue's own job controllers do.

A ClusterQueue of 8 GPU units whose one ResourceFlavor is a node of 6: Kueue admits a mesh of 8
procs (its quota is free) that the gang can never place there. Kueue admits on quota alone;
``waitForPodsReady`` is its answer to a workload that then does not start.

Aspects: the mesh that cannot be placed gets a Warning event with the gang's verdict
(Unschedulable), is evicted at the timeout (PodsReadyTimeout), its pods go and its quota is
released, and the mesh queued behind it is admitted and becomes Ready, its Workload saying
``PodsReady=True`` (Started), which is what keeps Kueue from evicting it (without the condition
Kueue evicted every admitted mesh at the timeout, Ready or not); the evicted mesh says why in
its status and is queued again; at its second timeout (the requeuing limit) Kueue deactivates its
Workload, and the operator leaves it inactive and says how to activate it; activated by hand,
it is queued again and is the mesh's to deactivate and activate across a suspend and resume, also
one that an operator older than the procmesh.io/suspended mark deactivated.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from procmesh_operator import workloads
from tests.cluster import testing
from tests.cluster.kueue import configs, manager
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import gang_checks, support
from tests.integration.operator.test_kueue import create_queued, workload_of

pytestmark = pytest.mark.cluster

NODE_UNITS = 6
QUOTA_UNITS = 8
#: Kueue's waitForPodsReady: long enough for a two-proc mesh to be Ready on a loaded machine; a
#: short back-off, ordered by eviction time (an evicted mesh queues behind those that waited);
#: the second timeout of a workload deactivates it.
WAIT_FOR_PODS_READY = {"timeout": "60s", "blockAdmission": False,
                       "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 1,
                                             "backoffLimitCount": 1}}


@pytest.fixture(scope="module")
def strict_kueue(cluster: Any, kueue: Any) -> Iterator[Any]:
    """The session's Kueue restarted with waitForPodsReady on, and as before afterwards."""
    with manager.restarted(cluster, kueue, wait_for_pods_ready=WAIT_FOR_PODS_READY) as instance:
        yield instance


@pytest.fixture(scope="module")
def node_key(cluster: Any) -> tuple[str, str]:
    """(a 6-unit node's name, the label and taint key that only it has)."""
    key = f"procmesh.io/test-pods-ready-{uuid.uuid4().hex[:6]}"
    name = f"gpu-zz-ready-{uuid.uuid4().hex[:6]}"  # after the session's gpu-node (see test_kueue.py)
    cluster.add_node(NodeConfig(name, gpus=2, gpu_replicas=NODE_UNITS // 2, labels={key: "yes"},
                                taints=({"key": key, "value": "yes", "effect": "NoSchedule"},)))
    return name, key


@pytest.fixture
def queue(strict_kueue: Any, custom: Any, namespace: str, node_key: tuple[str, str]) -> Iterator[str]:
    """A LocalQueue on a ClusterQueue of more GPU units than its one flavor's node has."""
    key = node_key[1]
    cluster_queue, flavor = f"cq-{namespace}", f"flavor-{namespace}"
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "resourceflavors",
                                        configs.resource_flavor(flavor, {key: "yes"}, [
                                            {"key": key, "operator": "Exists", "effect": "NoSchedule"}]))
    custom.create_cluster_custom_object(configs.GROUP, configs.VERSION, "clusterqueues",
                                        configs.cluster_queue(cluster_queue, flavor, {
                                            "cpu": "10", "memory": "10Gi", "nvidia.com/gpu": str(QUOTA_UNITS)}))
    custom.create_namespaced_custom_object(configs.GROUP, configs.VERSION, namespace, "localqueues",
                                           configs.local_queue(namespace, "team", cluster_queue))
    yield "team"
    custom.delete_cluster_custom_object(configs.GROUP, configs.VERSION, "clusterqueues", cluster_queue)
    custom.delete_cluster_custom_object(configs.GROUP, configs.VERSION, "resourceflavors", flavor)


def pods_ready(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    workload = workload_of(custom, namespace, support.get_mesh(custom, namespace, name))
    for c in (workload.get("status") or {}).get("conditions") or []:
        if c["type"] == workloads.PODS_READY:
            return dict(c)
    return {}


def test_a_mesh_admitted_but_never_placed_is_evicted_and_gives_its_quota_to_the_next(
        operator, kube, core, custom, namespace, node_key, queue):
    target = gang_checks.Place(node_key[0], {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}})
    create_queued(custom, namespace, "big", QUOTA_UNITS, target, queue)  # 8 procs, 6 units
    testing.wait_for(lambda: support.condition(support.get_mesh(custom, namespace, "big"), "Admitted")
                     .get("status") == "True" or None, "big admitted by Kueue: its quota is free")
    verdict = testing.wait_for(
        lambda: [e for e in support.events(core, namespace, "big") if e.reason == "Unschedulable"],
        "the gang's verdict on big as an event")
    assert verdict[0].type == "Warning" and verdict[0].message, verdict
    create_queued(custom, namespace, "small", 2, target, queue)

    # Once Kueue evicts big at the timeout and the operator releases its quota: the timeout and
    # what follows are Kueue's, so the wait is bounded by them, not by the default.
    ready = testing.wait_for(
        lambda: (lambda m: m if support.condition(m, "Ready").get("status") == "True" else None)(
            support.get_mesh(custom, namespace, "small")), "small Ready after big's eviction", timeout=600)
    assert ready["status"]["readyProcs"] == 2
    assert {k: pods_ready(custom, namespace, "small").get(k) for k in ("status", "reason")} == \
        {"status": "True", "reason": workloads.STARTED}  # so Kueue keeps it: no eviction at the timeout
    assert support.mesh_pods(core, namespace, "big") == []
    big = support.get_mesh(custom, namespace, "big")
    assert support.condition(big, "Ready")["reason"] == "Queued"
    assert "Exceeded the PodsReady timeout" in support.condition(big, "Admitted")["message"], big["status"]
    assert any(e.reason == "PodsReadyTimeout" and e.type == "Warning" for e in support.events(core, namespace, "big"))
    # Never all ready: no PodsReady written (Kueue reads none as WaitForStart), so a re-admission
    # is timed out again.
    assert pods_ready(custom, namespace, "big").get("reason") in (None, workloads.WAIT_FOR_START)

    # Queued again behind small; once small is gone, admitted again, timed out again: at the
    # requeuing limit Kueue deactivates its Workload, and the operator leaves it so (it activated
    # it again, as for a resumed mesh, and the limit never took effect), saying how to activate it.
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION, namespace,
                                           support.contract.PLURAL, "small")

    def deactivated() -> dict[str, Any] | None:
        mesh = support.get_mesh(custom, namespace, "big")
        admitted = support.condition(mesh, "Admitted")
        return mesh if admitted.get("reason") == "DeactivatedDueToRequeuingLimitExceeded" \
            and "Kueue deactivated" in admitted.get("message", "") else None  # evicted first, then released

    big = testing.wait_for(deactivated, "big deactivated by Kueue at its second timeout", timeout=600)
    name = workload_of(custom, namespace, big)["metadata"]["name"]
    assert support.condition(big, "Admitted")["message"].endswith(
        f"Kueue deactivated the mesh's Workload: The workload is deactivated due to exceeding the maximum number "
        f"of re-queuing retries; it is not queued again until it is active: kubectl patch workloads.kueue.x-k8s.io "
        f"{name} -n {namespace} --type merge -p '{{\"spec\":{{\"active\":true}}}}'; no proc runs until Kueue "
        f"admits the mesh from LocalQueue team"), big["status"]
    assert workload_of(custom, namespace, big)["spec"]["active"] is False
    assert support.mesh_pods(core, namespace, "big") == []

    # A user activates it by hand, while another mesh holds the quota it needs; it is suspended
    # and resumed before Kueue admits it again: the resume activates it (the operator took the
    # Workload it deactivated for the suspend, Kueue's Evicted condition still saying
    # DeactivatedDueTo..., for one Kueue deactivated, and left it inactive). Kueue admits it
    # once the quota is free (it stayed Requeued=False, out of its queue, when the release had
    # written Kueue's derived reason there).
    create_queued(custom, namespace, "holder", 2, gang_checks.Place(
        node_key[0], {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}), queue)
    support.wait_ready(custom, namespace, "holder")
    custom.patch_namespaced_custom_object(workloads.GROUP, workloads.VERSION, namespace,
                                          workloads.PLURAL, name, {"spec": {"active": True}})
    testing.wait_for(lambda: "Kueue deactivated" not in support.condition(
        support.get_mesh(custom, namespace, "big"), "Admitted").get("message", ""),
        "big queued again, its Workload active")

    # An operator older than the procmesh.io/suspended mark suspends it, with the one write it
    # made (2dfaed0^'s admitting.py: a merge patch of spec.active, its client's User-Agent
    # procmesh-operator, no field manager named); today's operator takes over and the mesh is
    # resumed: the Workload is the mesh's, activated again (it read as deactivated by Kueue).
    with support.session_operator_stopped(operator):
        support.patch_mesh(custom, namespace, "big", {"suspend": True})
        older = client.ApiClient(kube.configuration)
        older.user_agent = "procmesh-operator"
        client.CustomObjectsApi(older).patch_namespaced_custom_object(
            workloads.GROUP, workloads.VERSION, namespace, workloads.PLURAL, name, {"spec": {"active": False}})
    testing.wait_for(lambda: support.condition(support.get_mesh(custom, namespace, "big"),
                                               "Admitted").get("reason") == "Deactivated",
                     "big's Workload deactivated for the suspend by the older operator (not by Kueue)")
    assert workloads.SUSPENDED_ANNOTATION not in (workload_of(custom, namespace, big)["metadata"].get("annotations") or {})
    support.patch_mesh(custom, namespace, "big", {"suspend": False})
    testing.wait_for(lambda: workload_of(custom, namespace, big)["spec"].get("active") is True,
                     "big's Workload active again on resume")

    # Today's operator suspends and resumes it again.
    support.patch_mesh(custom, namespace, "big", {"suspend": True})
    testing.wait_for(lambda: support.condition(support.get_mesh(custom, namespace, "big"),
                                               "Admitted").get("reason") == "Deactivated",
                     "big's Workload deactivated for the suspend (not by Kueue)")
    support.patch_mesh(custom, namespace, "big", {"suspend": False})
    testing.wait_for(lambda: workload_of(custom, namespace, big)["spec"].get("active") is True,
                     "big's Workload active again on resume")
    assert "Kueue deactivated" not in support.condition(
        support.get_mesh(custom, namespace, "big"), "Admitted").get("message", "")
    custom.delete_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION, namespace,
                                           support.contract.PLURAL, "holder")
    testing.wait_for(lambda: support.condition(support.get_mesh(custom, namespace, "big"), "Admitted")
                     .get("status") == "True" or None, "big admitted by Kueue again", timeout=300)
