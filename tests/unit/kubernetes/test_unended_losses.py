"""A lost proc whose pod shows no end (attaching.KubernetesProcs.explain).

Aspects: a proc cut off from the network (its pod Running, not ready) is told as unreachable,
with no promise of a restart (the operator restarts only once a pod ends) and the two ways on;
a proc whose pod still looks well (the kubelet has not reported the death yet: the caller waits
at most peers.LOSS_DETAIL_SECONDS) says where its end will be read; a pod that ended is told
as before. The API is stubbed at our own wrapper (KubeApi's ``pod`` and ``get_mesh``).
"""

import time

from mesh_client._src.kubernetes import attaching

MESH = {"metadata": {"name": "m", "uid": "u"}, "spec": {"restartPolicy": "RestartProc", "maxRestarts": 3},
        "status": {"restarts": 0}}


class PodApi:
    namespace = "ns"

    def __init__(self, pod):
        self._pod = pod

    def pod(self, name):
        return self._pod

    def get_mesh(self, name):
        return MESH


def running(ready: str, **cond):
    return {"metadata": {"name": "m-1", "uid": "p1"}, "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready, **cond}],
                       "containerStatuses": [{"restartCount": 0, "state": {"running": {}}}]}}


def explain(pod, reason):
    procs = attaching.KubernetesProcs(PodApi(pod), MESH, ["m-0", "m-1"], created=False)
    return procs.explain(1, reason, time.monotonic())


def test_a_cut_off_proc_is_unreachable_and_not_promised_a_restart():
    pod = running("False", reason="ContainersNotReady", message="containers with unready status: [proc]",
                  lastTransitionTime="2026-12-07T08:00:00Z")
    text = explain(pod, "connection to m[1] failed: [Errno 110] Connection timed out")
    assert text.startswith("proc ns/m rank 1 (m-1) is unreachable: connection to m[1] failed: [Errno 110] "
                           "Connection timed out; its pod m-1 on node n1 still runs, not ready since "
                           "2026-12-07T08:00:00Z (ContainersNotReady: containers with unready status: [proc])"), text
    assert "the operator restarts it (" not in text  # no restart comes while the pod runs
    assert "mesh.reconnect()" in text and "kubectl delete pod -n ns m-1" in text
    assert "restartPolicy RestartProc" in text


def test_a_death_the_pod_does_not_show_yet_says_where_to_read_it():
    text = explain(running("True"), "m[1] closed the connection")
    assert text.startswith("proc ns/m rank 1 (m-1) is gone: m[1] closed the connection; how it ended is not "
                           "in its pod's status yet: see kubectl describe pod -n ns m-1, or procmesh describe "
                           "-n ns m (LAST FAILURE), in a moment; the operator restarts it"), text


def test_an_ended_pod_is_told_as_before():
    pod = running("False")
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    text = explain(pod, "m[1] closed the connection")
    assert "is gone: its container in pod m-1 on node n1 terminated (exit code 137, OOMKilled)" in text
    assert "not in its pod's status yet" not in text and "unreachable" not in text
