"""A mesh's lifetime follows the program that created it (issue 15, item 3), against the real
control plane and operator.

Aspects: a controller killed with SIGKILL stops renewing its mesh's lease and the operator
deletes the mesh (with a LeaseExpired event), pods and all; a controller that raises deletes its
mesh on exit, long before its lease could lapse; so does one ended by SIGTERM, which still dies
by that signal, while a SIGTERM handler of the program's own stays its own; a controller in a pod
owns its mesh, so deleting the pod deletes the mesh; ``outlive=True`` meshes stay and are still
reconciled.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from mesh_client._src import contract
from mesh_client._src.kubernetes.api import KubeApi, make_api_client
from mesh_client._src.kubernetes.errors import MeshNotFound
from mesh_client._src.kubernetes.lifetimes import LeaseRenewer
from tests.cluster import testing
from tests.integration.cli.support import env
from tests.integration.kubernetes.relay import Relay, through
from tests.integration.kubernetes.test_access import CREATOR
from tests.integration.operator.support import (
    ROOT,
    create_mesh,
    get_mesh,
    mesh_gone,
    mesh_pods,
    patch_mesh,
    wait_condition,
)

pytestmark = pytest.mark.cluster

CONTROLLER = """
import signal, sys, time
from mesh_client.kubernetes import KubernetesHostMesh
{prelude}
hosts = KubernetesHostMesh(hosts=1, namespace={namespace!r}, kubeconfig={kubeconfig!r}, timeout=120,
                           lease_seconds={lease})
mesh = hosts.spawn_procs(per_host={{"procs": 2}}, name={name!r}, outlive={outlive})
print("spawned", flush=True)
if {raise_!r}:
    raise RuntimeError("the controller failed")
time.sleep(600)
"""


def controller(cluster, namespace: str, name: str, *, lease: int = 600, outlive: bool = False,
               raise_: bool = False, prelude: str = "") -> subprocess.Popen[str]:
    code = CONTROLLER.format(namespace=namespace, kubeconfig=str(cluster.kubeconfig), lease=lease,
                             name=name, outlive=outlive, raise_=raise_, prelude=prelude)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env(), cwd=str(ROOT))
    first = proc.stdout.readline()
    assert first == "spawned\n", first + proc.stdout.read()
    return proc


def test_a_sigkilled_controllers_mesh_is_deleted_when_its_lease_lapses(cluster, custom, core, namespace,
                                                                       operator):
    proc = controller(cluster, namespace, "doomed", lease=6)
    mesh = get_mesh(custom, namespace, "doomed")
    assert mesh["spec"]["lease"] == {"durationSeconds": 6}
    assert mesh["metadata"]["annotations"]["procmesh.io/lease-renew-time"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    testing.wait_for(lambda: mesh_gone(custom, namespace, "doomed"), "the operator deleting the unrenewed mesh")
    testing.wait_for(lambda: not mesh_pods(core, namespace, "doomed"), "its pods collected")
    events = [e for e in core.list_namespaced_event(namespace).items if e.reason == "LeaseExpired"]
    assert [e.involved_object.name for e in events] == ["doomed"]
    assert "lease was not renewed for 6 s" in events[0].message


def test_a_controller_that_raises_deletes_its_mesh_on_exit(cluster, custom, namespace, operator):
    proc = controller(cluster, namespace, "raised", raise_=True)  # a 600 s lease: not what deletes it
    assert proc.wait(timeout=60) == 1
    assert "RuntimeError: the controller failed" in proc.stdout.read()
    testing.wait_for(lambda: mesh_gone(custom, namespace, "raised"), "the mesh deleted as its creator exited")


def test_a_sigterminated_controller_deletes_its_mesh_then_dies_by_sigterm(cluster, custom, namespace, operator):
    """Python runs no atexit handler on SIGTERM: the mesh stayed until its lease lapsed."""
    proc = controller(cluster, namespace, "terminated")  # a 600 s lease: not what deletes it
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM, proc.stdout.read()
    assert mesh_gone(custom, namespace, "terminated") or \
        get_mesh(custom, namespace, "terminated")["metadata"].get("deletionTimestamp")  # asked before it died
    testing.wait_for(lambda: mesh_gone(custom, namespace, "terminated"), "the mesh deleted as its creator was terminated")


def test_a_controllers_own_sigterm_handler_is_left_in_place(cluster, custom, namespace, operator):
    mine = "signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))"
    proc = controller(cluster, namespace, "handled", prelude=mine)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 3, proc.stdout.read()
    testing.wait_for(lambda: mesh_gone(custom, namespace, "handled"), "the mesh deleted as its creator exited")


def test_an_outliving_mesh_stays_after_its_controller_is_killed(cluster, custom, namespace, operator):
    proc = controller(cluster, namespace, "keeper", outlive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    mesh = get_mesh(custom, namespace, "keeper")
    assert "lease" not in mesh["spec"] and not mesh["metadata"].get("ownerReferences")
    patch_mesh(custom, namespace, "keeper", {"maxRestarts": 9})
    wait_condition(custom, namespace, "keeper", "Ready", "True")  # reconciled at generation 2, alive


IN_POD = textwrap.dedent("""
    import time
    from mesh_client.kubernetes import KubernetesHostMesh
    hosts = KubernetesHostMesh(hosts=1, timeout=120, lease_seconds=600)
    hosts.spawn_procs(per_host={"procs": 1}, name="owned")
    print("spawned", flush=True)
    time.sleep(600)
""")


def test_a_controller_pods_mesh_goes_with_the_pod(cluster, kube, custom, core, namespace, operator):
    with testing.service_account_client(cluster, kube, namespace, "controller", CREATOR):
        pod = testing.python_pod("controller", IN_POD, serviceAccountName="controller", container={"env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]})
        uid = core.create_namespaced_pod(namespace, pod).metadata.uid
        testing.wait_for(lambda: "spawned" in testing.pod_output(cluster, namespace, "controller"),
                         "the in-cluster controller spawned its mesh")
        owners = get_mesh(custom, namespace, "owned")["metadata"]["ownerReferences"]
        assert owners == [{"apiVersion": "v1", "kind": "Pod", "name": "controller", "uid": uid}]
        core.delete_namespaced_pod("controller", namespace)
        testing.wait_for(lambda: mesh_gone(custom, namespace, "owned"), "garbage collection of the pod's mesh")


def test_the_lease_renewer_outlives_an_api_server_that_went_away(cluster, crd, custom, namespace, tmp_path,
                                                                  capfd):
    """Renewals that cannot reach the API server (refused, then not answered) are retried, and
    resume when it is back: before, urllib3's error ended the renewing thread, and the operator
    deleted a live controller's mesh when the lease lapsed. A renewal waits a third of the
    renewal period at most, so one stuck request cannot outlast the lease."""
    create_mesh(custom, namespace, "leased", hosts=1, perHost=[{"name": "procs", "size": 1}])
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    api = KubeApi(make_api_client(str(through(relay, cluster, tmp_path))), namespace)
    renewer = LeaseRenewer(api, "leased", 9)  # renews every 3 s, each renewal waiting 1 s at most
    try:
        renewer.start()
        relay.close()  # refused
        testing.wait_for(lambda: "cannot renew the lease of ProcMesh" in capfd.readouterr().err or None,
                         "a renewal that failed, said once")
        relay = Relay(("127.0.0.1", cluster.ports.apiserver), port=relay.port)
        relay.holding.set()  # listening, never answering
        time.sleep(7)  # renewals time out meanwhile (their thread must not be stuck in one)
        relay.holding.clear()
        relay.close()
        relay = Relay(("127.0.0.1", cluster.ports.apiserver), port=relay.port)  # back
        back = datetime.datetime.now(datetime.timezone.utc)

        def renewed_since_back():
            stamp = get_mesh(custom, namespace, "leased")["metadata"]["annotations"]["procmesh.io/lease-renew-time"]
            return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%z") > back or None

        testing.wait_for(renewed_since_back, "a renewal once the API server answers again")
        assert renewer._thread.is_alive()
    finally:
        renewer.stop()
        relay.close()
        api.api_client.close()


def test_a_controller_never_renews_nor_deletes_a_mesh_made_since_under_its_meshs_name(cluster, crd, custom,
                                                                                     namespace):
    """A program's mesh deleted by hand and made again under the same name (a redeploy, another
    user) is not the program's: before, its lease renewals kept patching the new mesh and its
    exit deleted it. Renewals and deletes carry the uid of the mesh the program made."""
    mine = create_mesh(custom, namespace, "reborn", hosts=1, perHost=[{"name": "procs", "size": 1}])
    api = KubeApi(make_api_client(str(cluster.kubeconfig)), namespace)
    renewer = LeaseRenewer(api, "reborn", 600, uid=mine["metadata"]["uid"])
    try:
        renewer.start()
        assert "procmesh.io/lease-renew-time" in get_mesh(custom, namespace, "reborn")["metadata"]["annotations"]
        custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "reborn")
        testing.wait_for(lambda: mesh_gone(custom, namespace, "reborn"), "the first mesh deleted")
        theirs = create_mesh(custom, namespace, "reborn", hosts=1, perHost=[{"name": "procs", "size": 1}])

        with pytest.raises(MeshNotFound, match=r"was deleted, and the mesh of that name now is another one"):
            api.renew_lease("reborn", "2026-12-07T00:00:00.000000Z", uid=mine["metadata"]["uid"])
        renewer.delete_now(timeout=30)  # what the program's exit does
        api.delete_mesh("reborn", uid=mine["metadata"]["uid"])  # what its ProcMesh.stop() does

        now = get_mesh(custom, namespace, "reborn")
        assert now["metadata"]["uid"] == theirs["metadata"]["uid"]
        assert "procmesh.io/lease-renew-time" not in (now["metadata"].get("annotations") or {})
        api.delete_mesh("reborn", uid=theirs["metadata"]["uid"])  # the right uid deletes it
        testing.wait_for(lambda: mesh_gone(custom, namespace, "reborn"), "the second mesh deleted by its uid")
    finally:
        renewer.stop()
        api.api_client.close()
