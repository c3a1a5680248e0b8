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
from tests.integration.operator.support import create_mesh

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
    core = client.CoreV1Api(kube)
    rbac = client.RbacAuthorizationV1Api(kube)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "viewer"}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "see-meshes"}, "rules": [
        {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "viewer-sees"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "see-meshes"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}]})
    token = core.create_namespaced_service_account_token("viewer", namespace, {"spec": {"expirationSeconds": 600}}).status.token
    config = client.Configuration()
    config.host = kube.configuration.host
    config.ssl_ca_cert = str(cluster.layout.pki / "ca.crt")
    config.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(config) as as_viewer:
        testing.wait_for(lambda: client.CustomObjectsApi(as_viewer).get_namespaced_custom_object(
            "procmesh.io", "v1alpha1", namespace, "procmeshes", "private"), "the viewer role took effect")
        with pytest.raises(MeshAccessDenied) as info:
            attach("private", namespace, api_client=as_viewer, timeout=120)
    assert f"'get' permission on secrets in namespace {namespace}" in str(info.value)
