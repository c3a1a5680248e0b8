"""Reaching procs through the API server (a port-forward per proc) instead of their pod IPs:
calls work end to end, the client's RBAC governs the forward, and the mesh token still guards
the proc server behind it."""

import pytest

from mesh_client.kubernetes import KubernetesHostMesh, MeshAccessDenied, attach
from tests.cluster import testing
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import create_mesh

pytestmark = pytest.mark.cluster


def test_calls_through_port_forwards(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "forwarded", hosts=1, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("forwarded", namespace, api_client=kube, timeout=120, via_api_server=True)
    rec = mesh.spawn("rec", Recorder)
    assert list(rec.echo.call("through").get().values()) == ["through", "through"]
    big = bytes(range(256)) * 8192
    assert rec.slice(hosts=0, gpus=1).echo.call_one(big).get() == big
    stream = mesh._group.peers[0]._channel.stream
    assert type(stream).__name__ == "ForwardedStream"  # not a TCP connection to the pod IP
    mesh.stop().get()


def test_spawn_procs_through_port_forwards(kube, namespace, operator):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120, via_api_server=True)
    mesh = hosts.spawn_procs(per_host={"gpus": 1}, name="remote")
    assert mesh.spawn("rec", Recorder).echo.call_one(7).get() == 7
    mesh.stop().get()


def test_the_forward_needs_the_portforward_permission(cluster, kube, custom, namespace, operator):
    create_mesh(custom, namespace, "guarded", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    rules = [
        {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]
    with testing.service_account_client(cluster, kube, namespace, "remote", rules) as remote:
        with pytest.raises(MeshAccessDenied, match="pods/portforward"):
            attach("guarded", namespace, api_client=remote, timeout=120, via_api_server=True)


def test_respawn_through_port_forwards(kube, custom, namespace, operator, faults):
    """A restarted proc's new pod is reached through a port-forward too (its address is new)."""
    import os
    import signal

    from mesh_client import SupervisionError
    from mesh_client._src.runtime.identifying import identify_proc

    create_mesh(custom, namespace, "fwd-again", hosts=1, perHost=[{"name": "gpus", "size": 1}],
                restartPolicy="RestartProc", maxRestarts=1)
    mesh = attach("fwd-again", namespace, api_client=kube, timeout=120, via_api_server=True)
    rec = mesh.spawn("rec", Recorder)
    pod_address = mesh._group.addresses[0]
    os.kill(identify_proc(pod_address, mesh._group.token)["pid"], signal.SIGKILL)  # the test reaches pod IPs
    with pytest.raises(SupervisionError):
        rec.echo.call_one(1).get(timeout=60)
    assert mesh.respawn() == [0]
    assert rec.echo.call_one(2).get(timeout=60) == 2
    assert type(mesh._group.peers[0]._channel.stream).__name__ == "ForwardedStream"
    mesh.stop().get()


def test_a_port_forward_that_ends_under_a_live_proc_is_reopened_by_itself(kube, custom, namespace, operator, faults):
    import socket
    import threading

    from mesh_client import ConnectionBroken
    from mesh_client._src.actor import supervision

    create_mesh(custom, namespace, "fwd-cut", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    mesh = attach("fwd-cut", namespace, api_client=kube, timeout=120, via_api_server=True)
    # A name of its own: procs that earlier tests killed (actor meshes "rec") may report late.
    rec = mesh.spawn("fwd_cut_rec", Recorder)
    assert rec.record.call_one("before").get(timeout=60) == 1
    in_flight = rec.sleep.call_one(1)
    old = mesh._group.peers[0]
    old._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)  # the forward's local end
    with pytest.raises(ConnectionBroken, match="but the proc is alive"):
        in_flight.get(timeout=60)
    assert mesh._group.peers[0] is not old
    assert type(mesh._group.peers[0]._channel.stream).__name__ == "ForwardedStream"  # a new port-forward
    assert rec.record.call_one("after").get(timeout=60) == 2  # the same actor, its state kept
    settled = threading.Event()
    supervision.submit(settled.set)
    assert settled.wait(60) and faults.named("fwd_cut_rec") == []
    mesh.stop().get()
