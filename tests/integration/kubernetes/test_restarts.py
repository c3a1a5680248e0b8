"""After a proc pod's proc server is killed (SIGKILL): the operator restarts it, and the client
has a way on.

Aspects: the call that fails at once says the operator restarts the proc (policy and restarts
used) and names ``respawn``/``reconnect``; ``reconnect()`` called at once waits for the new pod
and returns its rank, and its bootstrap runs there again; an old handle on it then fails naming
the restart ("1 of at most 2 restarts used"), survivors keep their state; ``respawn()`` spawns the
actors again with the first spawn's arguments so the old handle answers; a second kill, seen only
after the operator restarted the proc, is said to be a restart ("2 of at most 2 restarts used") by the
call itself, and ``respawn()`` brings the handle back once more; a connection that breaks under
a live proc (same pod, Ready) is reached again at once by itself (runtime/relinking.py: no
fault, the call in flight fails with ``ConnectionBroken``), with its actors and their state, and
no bootstrap; its actors are watched again (a kill is still a fault).
"""

import os
import re
import signal
import socket
import threading
import time

import pytest
from kubernetes import client

from mesh_client import ConnectionBroken, SupervisionError
from mesh_client._src.actor import supervision
from mesh_client._src.runtime.identifying import identify_proc
from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import condition, create_mesh, get_mesh, token_secret

pytestmark = pytest.mark.cluster


def set_marker():
    os.environ["TEST_BOOTSTRAPPED"] = str(os.getpid())


def kill(mesh, index):
    os.kill(identify_proc(mesh._group.addresses[index], mesh._group.token)["pid"], signal.SIGKILL)


def test_after_a_restart_reconnect_and_respawn(kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "phoenix", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=2)
    mesh = attach("phoenix", namespace, api_client=kube, timeout=120, bootstrap=set_marker)
    rec = mesh.spawn("rec", Recorder, "tagged")
    first, second = rec.slice(hosts=0, gpus=0), rec.slice(hosts=0, gpus=1)
    assert first.record.call_one("kept").get() == 1

    kill(mesh, 1)
    with pytest.raises(SupervisionError) as lost:
        rec.echo.call(1).get(timeout=60)
    message = str(lost.value)
    assert f"proc {namespace}/phoenix rank 1 (phoenix-1) is gone" in message
    # The count is read from the mesh's status when the message is made, after the client asked
    # the proc's address again (relinking): the operator may have counted the restart by then.
    assert re.search(r"the operator restarts it \(restartPolicy RestartProc, [01] of at most 2 restarts used so far\)", message)
    assert "mesh.respawn()" in message and "mesh.reconnect()" in message

    assert mesh.reconnect() == [1]  # waits for the new pod
    with pytest.raises(SupervisionError, match=r"proc .*phoenix-1.* was restarted \(1 of at most 2 restarts used, "
                                               r"restartPolicy RestartProc\) after actor mesh 'rec' was spawned"):
        second.echo.call_one(2).get(timeout=60)
    assert first.record.call_one("still").get() == 2  # the survivor kept its actor and state
    mesh.respawn()
    where = rec.where.call().get()
    assert {v["tag"] for v in where.values()} == {"tagged"}
    assert where.item(hosts=0, gpus=1)["env"]["TEST_BOOTSTRAPPED"] == str(where.item(hosts=0, gpus=1)["pid"])
    assert list(rec.record.call("c").get().values()) == [3, 1]

    kill(mesh, 1)

    def restarted_twice():
        m = get_mesh(custom, namespace, "phoenix")
        fresh = condition(m, "Ready").get("observedGeneration") == m["metadata"]["generation"]
        return fresh and condition(m, "Ready").get("status") == "True" and m["status"].get("restarts") == 2

    testing.wait_for(restarted_twice, "phoenix restarted its proc a second time and is Ready again")
    testing.wait_for(lambda: mesh._group.peers[1].lost, "the client saw the connection drop")
    with pytest.raises(SupervisionError, match=r"proc .*phoenix-1.* was restarted \(2 of at most 2 restarts used"):
        second.echo.call_one(3).get(timeout=60)
    assert mesh.respawn() == [1]
    assert second.echo.call_one(4).get(timeout=60) == 4
    mesh.stop().get()


def test_restart_mesh_brings_every_proc_back(kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "whole", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartMesh", maxRestarts=1)
    mesh = attach("whole", namespace, api_client=kube, timeout=120)
    rec = mesh.spawn("rec", Recorder)
    assert list(rec.record.call("a").get().values()) == [1, 1]
    kill(mesh, 0)
    with pytest.raises(SupervisionError, match="restartPolicy RestartMesh"):
        rec.slice(hosts=0, gpus=0).echo.call_one(1).get(timeout=60)
    assert mesh.respawn() == [0, 1]  # waits for the whole mesh's new pods, then spawns on both
    assert list(rec.record.call("b").get().values()) == [1, 1]  # fresh everywhere
    mesh.stop().get()


def test_a_never_policy_says_so_and_reconnect_raises_the_cause(kube, custom, namespace, operator, faults):
    from mesh_client.kubernetes import MeshNotReady

    create_mesh(custom, namespace, "once", hosts=1, perHost=[{"name": "gpus", "size": 1}], restartPolicy="Never")
    mesh = attach("once", namespace, api_client=kube, timeout=120)
    rec = mesh.spawn("rec", Recorder)
    kill(mesh, 0)
    with pytest.raises(SupervisionError, match=r"restartPolicy Never: the operator does not restart it"):
        rec.echo.call_one(1).get(timeout=60)
    with pytest.raises(MeshNotReady, match="ProcFailed"):
        mesh.reconnect()
    mesh.stop().get()


def test_reconnect_reaches_a_live_proc_whose_connection_broke(kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "cutoff", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=2)
    mesh = attach("cutoff", namespace, api_client=kube, timeout=120, bootstrap=set_marker)
    mesh._group.owner.timeout = 30  # without the fix, reconnect waits this long for a pod that never comes
    # A name of its own: the procs that earlier tests killed (actor meshes "rec") may report late.
    rec = mesh.spawn("cutoff_rec", Recorder)
    second = rec.slice(hosts=0, gpus=1)
    before = second.where.call_one().get(timeout=60)
    assert second.record.call_one("before").get(timeout=60) == 1

    peer = mesh._group.peers[1]
    in_flight = second.sleep.call_one(1)
    peer._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)  # the proc lives on
    with pytest.raises(ConnectionBroken, match=r"cutoff\[hosts=0,gpus=1\].*but the proc is alive.*may or may not have run"):
        in_flight.get(timeout=60)
    assert peer.lost and mesh._group.peers[1] is not peer  # reached again at once, without reconnect()
    after = second.where.call_one().get(timeout=60)
    assert after["pid"] == before["pid"]
    assert after["env"]["TEST_BOOTSTRAPPED"] == before["env"]["TEST_BOOTSTRAPPED"]
    assert second.record.call_one("after").get(timeout=60) == 2  # the same actor, its state kept
    settled = threading.Event()
    supervision.submit(settled.set)  # after the failed watches were handled
    assert settled.wait(60) and faults.named("cutoff_rec") == []  # no fault: the controller lives on
    assert mesh.reconnect() == []  # nothing restarted, nothing to reach again
    assert get_mesh(custom, namespace, "cutoff")["status"].get("restarts", 0) == 0

    kill(mesh, 1)  # watched again over the new connection: a real death is still a fault
    assert faults.wait("cutoff_rec")[0].crashed_ranks == [1]
    mesh.stop().get()


def mesh_only(secret):
    """A user who may use mesh ``nopods`` (get and watch it, read its token Secret ``secret``) but
    not list its pods."""
    return [
        {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"], "verbs": ["get", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]},
    ]


def cut(mesh, index):
    peer = mesh._group.peers[index]
    peer._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
    return peer


def test_reconnect_without_permission_to_list_pods(cluster, kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "nopods", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=2)
    secret = token_secret(client.CoreV1Api(kube), namespace, "nopods")
    with testing.service_account_client(cluster, kube, namespace, "nopods-user", mesh_only(secret)) as user:
        mesh = attach("nopods", namespace, api_client=user, timeout=120, progress=False, forward_output=False)
        owner = mesh._group.owner
        assert owner.api.visible_pods("nopods") is None  # forbidden: the status is all it has
        owner.timeout = 30  # without the fix, reconnect waits this long for a pod that never comes
        rec = mesh.spawn("rec", Recorder)
        second = rec.slice(hosts=0, gpus=1)
        pid = second.where.call_one().get(timeout=60)["pid"]
        assert second.record.call_one("before").get(timeout=60) == 1

        in_flight = second.sleep.call_one(1)
        cut(mesh, 1)  # a broken link under a live proc: reached again by itself, no pods needed
        with pytest.raises(ConnectionBroken):
            in_flight.get(timeout=60)

        successor = mesh._group.peers[1]
        for _ in range(600):  # bounded: its own IDENTIFY, sent when it connected, may still be on its way
            if successor.identity is not None:
                break
            time.sleep(0.05)
        successor.identity = None  # as if it broke before the proc said who it was:
        in_flight = second.sleep.call_one(1)
        cut(mesh, 1)
        with pytest.raises(SupervisionError) as lost:
            in_flight.get(timeout=60)
        assert not isinstance(lost.value, ConnectionBroken)
        assert faults.wait("rec")[0].crashed_ranks == [1]  # counted gone by the client...
        assert mesh.reconnect() == []  # ...but reconnect() finds the same proc where status says
        assert second.where.call_one().get(timeout=60)["pid"] == pid
        assert second.record.call_one("after").get(timeout=60) == 2  # the same actor, its state kept

        kill(mesh, 1)  # a real death: the new proc says it is another one (its boot id)
        assert len(faults.wait("rec", 2)) == 2
        assert mesh.respawn() == [1]
        assert second.record.call_one("fresh").get(timeout=60) == 1  # respawned, fresh state
        assert second.where.call_one().get(timeout=60)["pid"] != pid
        mesh.stop().get()
