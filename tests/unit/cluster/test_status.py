"""Pod status computation and unsupported-field detection of the process node (pure functions)."""

from tests.cluster.process_node import status, support


def _container(state, started=True, ready=False):
    return {"name": "c", "containerID": "procmesh://x" if started else None, "ready": ready,
            "state": state, "lastState": {}, "restartCount": 0}


def test_phase_follows_the_containers():
    running = _container({"running": {}})
    ok = _container({"terminated": {"exitCode": 0}})
    bad = _container({"terminated": {"exitCode": 1}})
    backoff = _container({"waiting": {"reason": "CrashLoopBackOff"}})
    creating = _container({"waiting": {"reason": "ContainerCreating"}}, started=False)
    assert status.phase([creating, running]) == "Pending"
    assert status.phase([running, ok]) == "Running"
    assert status.phase([backoff]) == "Running"
    assert status.phase([ok, ok]) == "Succeeded"
    assert status.phase([ok, bad]) == "Failed"
    # Init containers first: Pending while one runs or waits, Failed if one failed for good.
    assert status.phase([creating], [running]) == "Pending"
    assert status.phase([creating], [ok, backoff]) == "Pending"
    assert status.phase([creating], [bad]) == "Failed"
    assert status.phase([running], [ok]) == "Running"


def test_conditions_keep_their_transition_time_and_honour_readiness_gates():
    pod = {"spec": {"readinessGates": [{"conditionType": "example.com/gate"}]},
           "status": {"conditions": [{"type": "ContainersReady", "status": "True", "lastTransitionTime": "T0"}]}}
    computed = status.compute(pod, [_container({"running": {}}, ready=True)], pod_ip="127.10.0.1",
                              host_ip="127.0.1.1", start_time="T1", unsupported=[], now="T2")
    conditions = {c["type"]: c for c in computed["conditions"]}
    assert conditions["ContainersReady"]["lastTransitionTime"] == "T0"
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ReadinessGatesNotReady"
    assert computed["reason"] is None and computed["podIPs"] == [{"ip": "127.10.0.1"}]


def test_strategic_patch_clears_the_other_state_keys():
    patched = status.strategic({"containerStatuses": [_container({"running": {"startedAt": "T"}})]})
    assert patched["containerStatuses"][0]["state"] == {"waiting": None, "running": {"startedAt": "T"},
                                                       "terminated": None}


def test_unsupported_fields_are_listed_with_their_paths():
    pod = {"spec": {
        "hostPID": True, "initContainers": [{"name": "i", "restartPolicy": "Always"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "ok", "emptyDir": {}}],
        "containers": [{"name": "c", "lifecycle": {"preStop": {}}, "readinessProbe": {"grpc": {"port": 1}}}],
    }}
    found = support.unsupported(pod)
    assert [f.split(":")[0] for f in found] == [
        "spec.hostPID", "spec.volumes[0].persistentVolumeClaim", "spec.initContainers[0].restartPolicy",
        "spec.containers[0].lifecycle", "spec.containers[0].readinessProbe"]
    assert support.unsupported({"spec": {"containers": [{"name": "c", "image": "x"}]}}) == []
