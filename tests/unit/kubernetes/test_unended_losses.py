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


def explain(pod, reason, peer_left=False, mesh=MESH):
    api = PodApi(pod)
    api.get_mesh = lambda name: mesh
    procs = attaching.KubernetesProcs(api, mesh, ["m-0", "m-1"], created=False)
    return procs.explain(1, reason, time.monotonic(), peer_left)


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
    text = explain(running("True"), "m[1] closed the connection", peer_left=True)
    assert text.startswith("proc ns/m rank 1 (m-1) is gone: m[1] closed the connection; how it ended is not "
                           "in its pod's status yet: see kubectl describe pod -n ns m-1, or procmesh describe "
                           "-n ns m (LAST FAILURE), in a moment; the operator restarts it"), text


def test_an_ended_pod_is_told_as_before():
    pod = running("False")
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    text = explain(pod, "m[1] closed the connection", peer_left=True)
    assert "is gone: its container in pod m-1 on node n1 terminated (exit code 137, OOMKilled)" in text
    assert "not in its pod's status yet" not in text and "unreachable" not in text


def test_a_link_timed_out_to_a_ready_pod_blames_the_path_not_the_proc():
    """Only this client's path is cut (a network policy, a VPN): the kubelet's probe still
    reaches the proc, nothing ended, and nothing restarts it."""
    text = explain(running("True"), "connection to m[1] failed: [Errno 110] Connection timed out")
    assert text.startswith("proc ns/m rank 1 (m-1) is unreachable: connection to m[1] failed: [Errno 110] "
                           "Connection timed out; its pod m-1 on node n1 runs and is Ready (the cluster "
                           "reaches it): the path from this client to it is cut"), text
    assert "not in its pod's status yet" not in text and "the operator restarts it (" not in text


def test_a_proc_that_closed_its_link_is_not_called_cut_off():
    """The peer's kernel answered (end of stream): whatever its pod shows yet, it is no cut."""
    text = explain(running("False"), "m[1] closed the connection", peer_left=True)
    assert "unreachable" not in text and "cut off" not in text, text
    assert text.startswith("proc ns/m rank 1 (m-1) is gone: m[1] closed the connection; how it ended is not"), text


def test_a_proc_on_a_lost_node_is_told_what_the_operator_does():
    lost = {**MESH, "status": {"restarts": 0, "conditions": [
        {"type": "Ready", "status": "False", "reason": "NodeLost",
         "message": "rank 1 on node n1: the node is NotReady, unreachable or gone; its procs are restarted "
                    "per restartPolicy (RestartProc) once their node-loss toleration is up"}]}}
    text = explain(running("False"), "connection to m[1] failed: [Errno 110] Connection timed out", mesh=lost)
    assert "is unreachable" in text and "the mesh says NodeLost: rank 1 on node n1" in text, text
    assert "restarts nothing" not in text and "kubectl delete pod" not in text, text
