"""Supervision on the Kubernetes backend delivers the same objects as locally.

Aspects: a broadcast endpoint that raises in a pod reaches the client's unhandled_fault_hook as
a MeshFailure worded exactly as on the local backend; a pod's proc killed with -9 is a fault
naming the actor and the pod; a controller actor in a pod that owns a mesh in other pods gets its
failures in __supervise__; the pods serve as Monarch workers for attach_to_workers.
"""

import os
import signal

import pytest

from mesh_client._src.runtime.identifying import identify_proc
from mesh_client.kubernetes import attach
from tests.integration.local.actors import Lambda, SuperviseNest, raise_value_error
from tests.integration.operator.support import create_mesh

pytestmark = pytest.mark.cluster


def test_faults_in_pods_reach_the_hook_as_locally(kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "sup", hosts=1, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("sup", namespace, api_client=kube, timeout=120)
    actors = mesh.spawn("lam", Lambda)
    actors.slice(hosts=0, gpus=0).run.broadcast(raise_value_error)
    (failure,) = faults.wait("lam")
    assert failure.crashed_ranks == [0]
    assert failure.report().startswith(
        "The actor <root>.<tests.integration.local.actors.Lambda lam{'hosts': 0/1, 'gpus': 0/2}> and all its descendants have failed:\n"
        "  actor explicitly aborted due to: Traceback (most recent call last):"
    )
    assert failure.report().endswith("ValueError: Error.")

    pid = identify_proc(mesh._group.addresses[1], mesh._group.token)["pid"]
    os.kill(pid, signal.SIGKILL)
    failures = faults.wait("lam", 2)
    assert len(failures) == 2 and failures[1].crashed_ranks == [1]
    report = failures[1].report()
    assert report.startswith("The actor <root>.<tests.integration.local.actors.Lambda lam{'hosts': 0/1, 'gpus': 1/2}> and all its descendants have failed:")
    assert f"the process this actor was running on failed: proc {namespace}/sup rank 1 (sup-1) is gone" in report
    mesh.stop().get()


def test_an_actor_in_a_pod_supervises_its_own_meshes(kube, custom, namespace, operator, faults):
    create_mesh(custom, namespace, "owner", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    mesh = attach("owner", namespace, api_client=kube, timeout=120)
    owner = mesh.spawn("owner", SuperviseNest)  # its nest is a local mesh inside the pod
    owner.nested.call_one(raise_value_error).get()
    seen = []
    for _ in range(600):  # bounded: the failure arrives asynchronously
        seen = owner.seen.call_one().get()
        if seen:
            break
        import time

        time.sleep(0.05)
    assert seen and "SuperviseNest owner{'hosts': 0/1, 'gpus': 0/1}>.<tests.integration.local.actors.Lambda nested{'a_dim': 0/1}>" in seen[0][2]
    assert faults.named("owner") == []
    mesh.stop().get()


def test_a_controller_attaches_to_pods_as_monarch_workers(kube, custom, namespace, operator, faults):
    """The pods of a ProcMesh serve as Monarch workers: attach_to_workers with their addresses and
    the mesh token, then spawn procs inside every pod, as a Monarch program does on its workers."""
    from mesh_client import attach_to_workers
    from mesh_client._src.kubernetes import api as api_mod
    from mesh_client._src.kubernetes.attaching import wait_ready

    create_mesh(custom, namespace, "workers", hosts=2, perHost=[{"name": "slots", "size": 1}])
    api = api_mod.KubeApi(kube, namespace)
    mesh = wait_ready(api, "workers", 120, progress=False)
    addresses = [f"tcp://{p['address']}" for p in sorted(mesh["status"]["procs"], key=lambda p: p["rank"])]
    token = api.read_token("workers", api_mod.token_secret_name(mesh))
    hosts = attach_to_workers(name="pods", ca="trust_all_connections", workers=addresses, token=token)
    procs = hosts.spawn_procs(per_host={"gpus": 2})
    assert procs.sizes == {"hosts": 2, "gpus": 2}
    # A name of its own: procs that earlier tests killed (actor meshes "rec") may report late.
    where = procs.spawn("workers_rec", Lambda).run.call(os.getpid).get()
    assert len(set(where.values())) == 4
    procs.stop().get()
    hosts.stop().get()  # the workers keep running; the ProcMesh still owns them
    assert faults.named("workers_rec") == [] and faults.named("host_agent") == []
