"""Clear errors from the Kubernetes backend: missing mesh, a mesh that cannot or does not become
Ready (with the operator's or the scheduler's reason), a token the client may not read, and an
API server that stops answering."""

import threading

import pytest
from kubernetes import client

from mesh_client._src.kubernetes.api import KubeApi, make_api_client
from mesh_client.kubernetes import (
    ApiServerUnreachable,
    KubernetesHostMesh,
    MeshAccessDenied,
    MeshNotFound,
    MeshNotReady,
    attach,
)
from tests.cluster import testing
from tests.integration.kubernetes.relay import Relay, ended, through
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


def test_an_api_server_that_stops_answering_fails_the_call_with_a_clear_error(cluster, namespace, tmp_path,
                                                                                monkeypatch):
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    monkeypatch.setenv("PROCMESH_API_TIMEOUT", "1")
    api = KubeApi(make_api_client(str(through(relay, cluster, tmp_path))), namespace)
    try:
        assert api.timeout == 1.0
        assert api.pod("nobody") is None  # through the relay: answered (404)
        relay.holding.set()
        failed = ended(lambda: api.get_mesh("any"))
        assert isinstance(failed, ApiServerUnreachable), repr(failed)
        assert f"https://127.0.0.1:{relay.port} did not answer a request to get procmeshes {namespace}/any within 1 s" in str(failed)
        # attach tries again until its timeout, then says the same, instead of waiting for ever
        failed = ended(lambda: attach("any", namespace, api_client=api.api_client, timeout=3, progress=False))
        assert isinstance(failed, ApiServerUnreachable) and "did not answer" in str(failed), repr(failed)
        relay.close()
        failed = ended(lambda: api.get_mesh("any"))
        assert isinstance(failed, ApiServerUnreachable), repr(failed)
        assert f"cannot reach the API server https://127.0.0.1:{relay.port} to get procmeshes {namespace}/any" in str(failed)
    finally:
        relay.close()
        api.api_client.close()


def test_attach_rides_out_an_api_server_that_is_briefly_away(cluster, namespace, operator, custom, tmp_path):
    """Refused connections while attach waits for Ready are tried again until its timeout."""
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    kubeconfig = through(relay, cluster, tmp_path)
    api_client = make_api_client(str(kubeconfig))
    create_mesh(custom, namespace, "patient", hosts=1, perHost=[{"name": "procs", "size": 1}])
    relay.close()
    reopened = threading.Timer(2.0, lambda: reopen.append(Relay(("127.0.0.1", cluster.ports.apiserver), port=relay.port)))
    reopen: list[Relay] = []
    reopened.start()
    try:
        mesh = attach("patient", namespace, api_client=api_client, timeout=120, progress=False)
        assert dict(mesh.extent) == {"hosts": 1, "procs": 1}
        assert reopen, "attach returned before the API server was back"
    finally:
        reopened.join()
        for r in reopen:
            r.close()
        api_client.close()
