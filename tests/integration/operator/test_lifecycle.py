"""Apply -> Ready -> delete with garbage collection; kubectl views; the token works; suspend.

Aspects: children (pods, headless Service, token Secret) with owner references and labels;
status procs[] with addresses; printer columns; `kubectl explain`; the client reaches every
address with the Secret's token (and not without it); suspend/resume keeps the token; deletion
leaves nothing behind.
"""

import pytest

from mesh_client._src.wire import errors as wire_errors
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def test_apply_ready_delete(cluster, operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "cpu", hosts=2,
                        perHost=[{"name": "procs", "size": 2}])
    mesh = support.wait_ready(custom, namespace, "cpu")
    status = mesh["status"]
    assert (status["readyProcs"], status["desiredProcs"], status["phase"]) == (4, 4, "Ready")
    assert [p["rank"] for p in status["procs"]] == [0, 1, 2, 3]
    assert status["procs"][3]["coords"] == {"hosts": 1, "procs": 1}
    assert all(p["ready"] and p["address"].endswith(":26600") for p in status["procs"])
    for c in status["conditions"]:
        assert c["observedGeneration"] == mesh["metadata"]["generation"]

    pods = support.mesh_pods(core, namespace, "cpu")
    assert sorted(p.metadata.name for p in pods) == ["cpu-0", "cpu-1", "cpu-2", "cpu-3"]
    for pod in pods:
        assert pod.metadata.owner_references[0].uid == mesh["metadata"]["uid"]
        assert pod.metadata.labels["procmesh.io/rank"] == pod.metadata.name.split("-")[1]
    svc = core.read_namespaced_service("cpu-procs", namespace)
    assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses
    assert len(support.token(core, namespace, "cpu")) == 64

    table = support.kubectl(cluster, "get", "pm", "cpu", "-n", namespace).stdout
    assert table.split("\n")[0].split()[:5] == ["NAME", "READY", "DESIRED", "PHASE", "RESTARTS"]
    assert table.split("\n")[1].split()[:5] == ["cpu", "4", "4", "Ready", "0"]
    ready_events = [e for e in support.events(core, namespace, "cpu") if e.reason == "MeshReady"]
    assert ready_events and ready_events[0].type == "Normal"

    support.kubectl(cluster, "delete", "pm", "cpu", "-n", namespace)
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "cpu"), "pods collected")
    testing.wait_for(lambda: not [s for s in core.list_namespaced_secret(namespace).items
                                  if s.metadata.name == "cpu-token"], "secret collected")


def test_explain_teaches_the_resource(cluster, crd):
    out = support.kubectl(cluster, "explain", "procmesh.spec").stdout
    for field in ("hosts", "perHost", "gpus", "colocateWith", "template", "restartPolicy",
                  "maxRestarts", "suspend", "port"):
        assert field in out
    assert "memoryFraction" in support.kubectl(cluster, "explain", "pm.spec.gpus").stdout


def test_client_connects_with_the_secret_token(operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "tok", perHost=[{"name": "procs", "size": 3}])
    mesh = support.wait_ready(custom, namespace, "tok")
    token = support.token(core, namespace, "tok")
    for proc in mesh["status"]["procs"]:
        identity = support.identify(proc["address"], token)
        assert identity["rank"] == proc["rank"] and identity["mesh"] == "tok"
    with pytest.raises((OSError, wire_errors.WireError)):  # refused: wrong token
        support.identify(mesh["status"]["procs"][0]["address"], b"0" * 64)


def test_suspend_and_resume(operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "sus", perHost=[{"name": "procs", "size": 2}])
    support.wait_ready(custom, namespace, "sus")
    before = support.token(core, namespace, "sus")
    support.patch_mesh(custom, namespace, "sus", {"suspend": True})
    mesh = support.wait_condition(custom, namespace, "sus", "Ready", "False", "Suspended")
    assert mesh["status"]["phase"] == "Suspended" and mesh["status"]["desiredProcs"] == 0
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "sus"), "pods removed")
    support.patch_mesh(custom, namespace, "sus", {"suspend": False})
    mesh = support.wait_ready(custom, namespace, "sus")
    assert mesh["status"]["readyProcs"] == 2
    assert support.token(core, namespace, "sus") == before  # never rotated
    reasons = {e.reason for e in support.events(core, namespace, "sus")}
    assert {"Suspended", "Resumed"} <= reasons
