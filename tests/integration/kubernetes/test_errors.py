"""Clear errors from the Kubernetes backend: missing mesh, a mesh that cannot or does not become
Ready (with the operator's or the scheduler's reason), and a token the client may not read."""

import pytest
from kubernetes import client

from mesh_client.kubernetes import (
    KubernetesHostMesh,
    MeshAccessDenied,
    MeshNotFound,
    MeshNotReady,
    attach,
)
from tests.cluster import testing
from tests.integration.operator.support import create_mesh, token_secret

pytestmark = pytest.mark.cluster


def test_missing_mesh(kube, namespace, operator):
    with pytest.raises(MeshNotFound, match=f"ProcMesh {namespace}/ghost does not exist"):
        attach("ghost", namespace, api_client=kube, timeout=5)


def test_refused_gpu_budget_fails_at_once(kube, custom, namespace, operator, gpu_node, devices_free):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)
    with pytest.raises(MeshNotReady) as info:
        # the whole device plus a CUDA context fits no GPU of any node
        hosts.spawn_procs(per_host={"gpus": 1}, gpus=[0], memory_fraction=1.0, name="greedy")
    assert info.value.reason in ("GPUBudgetExceeded", "NoNodeFits")
    assert "cannot become Ready" in str(info.value) and "CUDA context" in str(info.value)


def test_unallocatable_dra_claim_fails_at_once(kube, custom, namespace, operator, dra_node,
                                               devices_free):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=300)
    no_such_gpu = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B300"'
    with pytest.raises(MeshNotReady) as info:
        hosts.spawn_procs(per_host={"gpus": 1}, name="b300", gpus={
            "mode": "dra", "deviceClassName": "gpu.nvidia.com", "selectors": [no_such_gpu]})
    assert info.value.reason == "ResourceClaimUnallocatable"
    text = str(info.value)
    assert "cannot become Ready" in text and "cannot allocate all claims" in text
    assert "was not Ready after" not in text  # it did not wait for the timeout


def test_unschedulable_pods_report_the_scheduler_message(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "nowhere", hosts=1, perHost=[{"name": "gpus", "size": 1}],
                template={"nodeSelector": {"example.com/no-such-label": "x"}})
    with pytest.raises(MeshNotReady) as info:
        attach("nowhere", namespace, api_client=kube, timeout=8, progress=False)
    text = str(info.value)
    assert "was not Ready after 8 s" in text
    assert "nowhere-0 is Pending" in text and "node(s) didn't match" in text


def test_unreadable_token_names_the_missing_permission(cluster, kube, custom, namespace, operator):
    create_mesh(custom, namespace, "private", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    rules = [
        {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]
    with testing.service_account_client(cluster, kube, namespace, "viewer", rules) as as_viewer:
        with pytest.raises(MeshAccessDenied) as info:
            attach("private", namespace, api_client=as_viewer, timeout=120)
    assert "--role=private-procmesh-access" in str(info.value)
    secret = token_secret(client.CoreV1Api(kube), namespace, "private")
    assert f"'get' on secrets {secret}" in str(info.value)
