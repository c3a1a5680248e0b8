"""attach() and KubernetesHostMesh against the real control plane and operator.

Aspects: attach to an applied ProcMesh, with its extent, and call actors in its pods; create from
Python, with a bootstrap, and stop() deletes only what it created; the same API as locally
(ValueMesh coordinates, slicing, actor-to-actor); a proc killed during a call fails it promptly
and the mesh returns to Ready under its restart policy.
"""

import os
import signal
import time

import pytest

from mesh_client import SupervisionError
from mesh_client._src.runtime.identifying import identify_proc
from mesh_client.kubernetes import KubernetesHostMesh, attach
from tests.cluster import testing
from tests.integration.local.actors import Caller, Recorder
from tests.integration.operator.support import condition, create_mesh, get_mesh

pytestmark = pytest.mark.cluster


def set_marker():
    os.environ["TEST_BOOTSTRAPPED"] = "in-pod"


def test_attach_to_an_applied_mesh(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "cpu", hosts=2, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("cpu", namespace, api_client=kube, timeout=120)
    assert mesh.sizes == {"hosts": 2, "gpus": 2}
    rec = mesh.spawn("rec", Recorder)
    info = rec.where.call().get()
    assert info.item(hosts=1, gpus=0)["rank"] == {"hosts": 1, "gpus": 0}
    assert len({v["pid"] for v in info.values()}) == 4
    assert rec.slice(hosts=0, gpus=1).echo.call_one("hi").get() == "hi"
    mesh.stop().get()  # attach created nothing, so stop only disconnects
    assert get_mesh(custom, namespace, "cpu")["metadata"]["name"] == "cpu"


def test_create_from_python_with_bootstrap_and_stop_deletes_only_it(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "bystander", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)
    mesh = hosts.spawn_procs(per_host={"gpus": 2}, bootstrap=set_marker, name="made")
    env = mesh.spawn("rec", Recorder).where.call().get()
    assert {v["env"].get("TEST_BOOTSTRAPPED") for v in env.values()} == {"in-pod"}
    mesh.stop().get()
    from kubernetes.client.rest import ApiException

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            get_mesh(custom, namespace, "made")
        except ApiException as exc:
            assert exc.status == 404
            break
        time.sleep(0.2)
    else:
        pytest.fail("stop() did not delete the ProcMesh it created")
    assert get_mesh(custom, namespace, "bystander")["metadata"]["name"] == "bystander"


def test_actors_in_pods_call_actors_in_other_pods(kube, custom, namespace, operator):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)
    a = hosts.spawn_procs(per_host={"gpus": 2}, name="targets")
    b = hosts.spawn_procs(per_host={"gpus": 1}, name="callers")
    targets = a.spawn("t", Recorder)
    out = b.spawn("c", Caller).relay.call_one(targets.slice(hosts=0), 5).get()
    assert out["answers"] == [5, 5]
    a.stop().get()
    b.stop().get()


def test_a_killed_proc_fails_its_call_and_the_mesh_recovers(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "fragile", hosts=1, perHost=[{"name": "gpus", "size": 2}],
                restartPolicy="RestartProc", maxRestarts=3)
    mesh = attach("fragile", namespace, api_client=kube, timeout=120)
    rec = mesh.spawn("rec", Recorder).slice(hosts=0, gpus=1)
    pid = identify_proc(mesh._group.addresses[1], mesh._group.token)["pid"]
    pending = rec.sleep.call_one(120)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SupervisionError) as info:
        pending.get(timeout=60)
    message = str(info.value)
    assert "fragile-1" in message and f"{namespace}/fragile" in message

    def recovered():
        m = get_mesh(custom, namespace, "fragile")
        ready = condition(m, "Ready")
        fresh = ready.get("observedGeneration") == m["metadata"]["generation"]
        return m if fresh and ready.get("status") == "True" and (m["status"].get("restarts") or 0) >= 1 else None

    testing.wait_for(recovered, "fragile restarted its proc and is Ready again")
    again = attach("fragile", namespace, api_client=kube, timeout=120)
    assert list(again.spawn("rec", Recorder).echo.call(3).get().values()) == [3, 3]


def test_stopping_one_attached_handle_leaves_another_in_this_process_working(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "twice", hosts=1, perHost=[{"name": "gpus", "size": 2}])
    first = attach("twice", namespace, api_client=kube, timeout=120)
    rec = first.spawn("rec", Recorder)
    assert [v for _, v in rec.echo.call("before").get().items()] == ["before", "before"]
    second = attach("twice", namespace, api_client=kube, timeout=120)
    other = second.spawn("other", Recorder)
    assert [v for _, v in other.echo.call("second").get().items()] == ["second", "second"]
    second.stop().get()  # disconnects the second handle only
    assert [v for _, v in rec.echo.call("after").get().items()] == ["after", "after"]
    first.stop().get()
