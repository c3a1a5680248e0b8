"""Clear errors from the Kubernetes backend: missing mesh, a mesh that cannot or does not become
Ready (with the operator's or the scheduler's reason), a token the client may not read, an API
server that stops answering, a mesh being deleted (attach fails at once) or deleted under a
program (its calls say so, not that the operator restarts its procs)."""

import re
import threading

import pytest
from kubernetes import client

from mesh_client import SupervisionError
from mesh_client._src import contract
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
from tests.integration.cli.test_logs import Talker
from tests.integration.kubernetes.relay import Relay, ended, through
from tests.integration.operator.support import (
    create_mesh,
    mesh_manifest,
    session_operator_with,
    token_secret,
    wait_ready,
)

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


@pytest.fixture
def impatient_operator(operator):
    """The session operator, restarted to report unseen pods after 3 s, restored afterwards."""
    with session_operator_with(operator, "--unseen-pod-seconds", "3") as restarted:
        yield restarted


def test_pods_no_scheduler_looks_at_are_reported_with_the_scheduler_name(
        kube, custom, namespace, impatient_operator):
    # No scheduler of that name runs: the pods stay Pending with no condition and no event.
    create_mesh(custom, namespace, "typo", hosts=1, perHost=[{"name": "gpus", "size": 1}],
                template={"schedulerName": "volcano-typo"})
    mesh = testing.wait_for(lambda: (m := custom.get_namespaced_custom_object(
        contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "typo")) and any(
        c.get("type") == "Ready" and c.get("reason") == "NotSeenByScheduler"
        for c in (m.get("status") or {}).get("conditions") or []) and m, "NotSeenByScheduler")
    ready = next(c for c in mesh["status"]["conditions"] if c["type"] == "Ready")
    assert "a scheduler named 'volcano-typo' running?" in ready["message"]
    with pytest.raises(MeshNotReady) as info:
        attach("typo", namespace, api_client=kube, timeout=3, progress=False)
    assert "NotSeenByScheduler" in str(info.value) and "volcano-typo" in str(info.value)


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
    assert f"'get' on its token Secret {secret}" in str(info.value)


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


def test_attach_to_a_mesh_being_deleted_fails_at_once_saying_so(kube, custom, namespace, operator):
    """Its status may still say Ready (the operator does not write a deleted mesh's): it used
    to read as a stale status ("is the operator running?") for the whole timeout."""
    body = mesh_manifest("held", hosts=1, perHost=[{"name": "procs", "size": 1}])
    body["metadata"]["finalizers"] = ["tests.procmesh.io/hold"]
    custom.create_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, body)
    wait_ready(custom, namespace, "held")
    custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "held")
    try:
        with pytest.raises(MeshNotReady, match=rf"ProcMesh {namespace}/held cannot become Ready: it is being deleted "
                                               r"\(since .*\) and waits for its finalizers \(tests.procmesh.io/hold") as info:
            attach("held", namespace, api_client=kube, timeout=300, progress=False)
        assert info.value.reason == "Terminating"
    finally:
        custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "held",
                                              {"metadata": {"finalizers": None}})


def test_calls_to_a_deleted_mesh_say_it_was_deleted_not_that_it_restarts(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "deleted", hosts=1, perHost=[{"name": "procs", "size": 1}])
    mesh = attach("deleted", namespace, api_client=kube, timeout=120, progress=False, forward_output=False)
    talker = mesh.spawn("talker", Talker)
    talker.say.call("hello").get(timeout=60)
    custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "deleted")

    seen: list[str] = []

    def failure() -> str | None:
        try:
            talker.say.call("still there?").get(timeout=60)
        except SupervisionError as exc:
            seen.append(str(exc))
            # A call during the procs' shutdown is answered by the proc itself ("is shutting
            # down: it received SIGTERM"); the ones after find it gone, and tell its story.
            return str(exc) if "is gone" in str(exc) else None
        return None

    message = testing.wait_for(failure, "a call finding the mesh's procs gone")
    assert not [m for m in seen if "the operator restarts it" in m], seen
    assert re.search(rf"ProcMesh {namespace}/deleted( was deleted|: it is being deleted \(since .*?\).*?): its procs "
                     r"are gone for good; spawn or attach a new mesh", message), message
    assert "the operator restarts it" not in message
    mesh.stop().get(timeout=60)
