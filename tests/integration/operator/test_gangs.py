"""A mesh is one gang, through the Kubernetes 1.36 PodGroup API (the session cluster serves it:
tests/cluster turns on GenericWorkload and GangScheduling by default). Issue 16's checks, on a
node of 6 time-sliced GPU units (2 GPUs x 3 replicas) that only this module's meshes tolerate.

Aspects: the mesh's PodGroup (a gang of every proc) and its pods' schedulingGroup; a 12-proc
mesh holds no unit while a 6-proc one runs beside it; 4 + 4 + 6 procs take turns with no
deadlock; template.priorityClassName reaches the pods. test_gang_fallback.py runs the same
checks on a cluster without the API.
"""

import uuid

import pytest

from procmesh_operator import ganging
from tests.cluster.process_node.config import NodeConfig
from tests.integration.operator import gang_checks, support

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def place(cluster):
    key = f"procmesh.io/test-gang-{uuid.uuid4().hex[:6]}"
    name = f"gpu-zz-gang-{uuid.uuid4().hex[:6]}"
    cluster.add_node(NodeConfig(name, gpus=2, gpu_replicas=3, labels={key: "yes"},
                                taints=({"key": key, "value": "yes", "effect": "NoSchedule"},)))
    return gang_checks.Place(name, {
        "nodeSelector": {key: "yes"},
        "tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]})


def pod_group(kube, namespace, name):
    from kubernetes import client

    return client.CustomObjectsApi(kube).get_namespaced_custom_object(
        ganging.POD_GROUP_GROUP, ganging.POD_GROUP_VERSION, namespace, ganging.POD_GROUP_PLURAL,
        name)


def test_a_mesh_larger_than_the_node_holds_no_gpu(cluster, operator, custom, core, kube, namespace,
                                                  place):
    mesh = gang_checks.mesh_larger_than_the_node_holds_nothing(custom, core, kube, namespace, place)
    group = pod_group(kube, namespace, f"twelve-{mesh['metadata']['uid'][:8]}")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 12}}
    assert group["metadata"]["ownerReferences"][0]["uid"] == mesh["metadata"]["uid"]
    pods = support.mesh_pods(core, namespace, "twelve")
    assert {p.spec.scheduling_group.pod_group_name for p in pods} == {group["metadata"]["name"]}
    assert not any(p.spec.scheduling_gates for p in pods)  # the scheduler holds them, not us
    # kubectl get shows the reason in its own column.
    table = support.kubectl(cluster, "get", "pm", "-n", namespace).stdout
    header, *rows = table.splitlines()
    assert "SCHEDULED" in header
    assert any(r.split()[0] == "twelve" and "Unschedulable" in r for r in rows), table


def test_meshes_take_turns_without_deadlock(operator, custom, core, namespace, place):
    order = gang_checks.meshes_take_turns_without_deadlock(custom, core, namespace, place)
    assert sorted(order) == ["four-a", "four-b", "six"]


def test_priority_class_name_passes_through(operator, custom, core, kube, namespace, place):
    gang_checks.priority_passes_through(custom, core, kube, namespace, place)
