"""A ``KubernetesHostMesh``'s ``stop()`` and ``shutdown()`` (Monarch's owned host mesh), against
the real control plane and operator.

Aspects: ``stop()`` deletes the ProcMeshes it spawned that are still up (one stopped before is
left as it is) and the host mesh spawns again after; ``shutdown()`` deletes them too, and a later
``spawn_procs``, ``shutdown()`` or ``stop()`` raises Monarch's RuntimeError saying what to do; a spawn that was waiting for its
mesh when ``stop()`` or ``shutdown()`` came deletes that mesh once it is up and raises, and the
future of that ``stop()`` or ``shutdown()`` completes only then (Monarch drains pending spawns).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from mesh_client.kubernetes import KubernetesHostMesh
from tests.cluster import testing
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import mesh_gone, mesh_pods

pytestmark = pytest.mark.cluster


def test_stop_and_shutdown_delete_the_meshes_the_host_mesh_spawned(kube, custom, namespace, operator):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)
    first = hosts.spawn_procs(per_host={"gpus": 1}, name="hl-first")
    kept = hosts.spawn_procs(per_host={"gpus": 1}, name="hl-kept", outlive=True)
    first.stop().get()
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-first"), "the mesh's own stop() deleting it")
    hosts.stop().get(timeout=120)
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-kept"), "the host mesh's stop() deleting what it spawned")
    assert kept._stopped

    again = hosts.spawn_procs(per_host={"gpus": 1}, name="hl-again")  # stop() keeps the hosts usable
    assert again.spawn("rec", Recorder).echo.call_one(3).get(timeout=60) == 3
    hosts.shutdown().get(timeout=120)
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-again"), "shutdown() deleting what the host mesh spawned")
    with pytest.raises(RuntimeError, match=r"^HostMesh has already been shut down: .*make a new KubernetesHostMesh"):
        hosts.spawn_procs(per_host={"gpus": 1}, name="hl-late")
    assert mesh_gone(custom, namespace, "hl-late")
    for again in (hosts.shutdown, hosts.stop):  # as Monarch's: raised by the future, not the call
        with pytest.raises(RuntimeError, match=r"^HostMesh has already been shut down: .*make a new KubernetesHostMesh"):
            again().get(timeout=10)


def test_async_with_shuts_the_host_mesh_down_at_the_end_of_the_block(kube, custom, namespace, operator):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)

    async def block() -> object:
        async with hosts as entered:
            assert entered is hosts
            procs = await hosts.spawn_procs_async(per_host={"gpus": 1}, name="hl-block")
            assert await procs.spawn("rec", Recorder).echo.call_one(5) == 5
        return procs

    procs = asyncio.run(block())
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-block"), "the block's end deleting what it spawned")
    assert procs._stopped
    with pytest.raises(RuntimeError, match=r"^HostMesh has already been shut down: "):
        asyncio.run(block())
    assert not hasattr(hosts, "__enter__")  # async with only


def spawn_waiting_for_a_node(core, kube, namespace: str, name: str) -> tuple[KubernetesHostMesh, threading.Thread,
                                                                          list[BaseException | object], str]:
    """A host mesh and a thread spawning ``name`` on it, whose pod asks for a node label that no
    node has until :func:`give_the_label` (Pending till then); returns once that pod exists."""
    key = f"procmesh.io/test-later-{uuid.uuid4().hex[:6]}"
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120,
                               template={"nodeSelector": {key: "yes"}})
    outcome: list[BaseException | object] = []

    def spawn() -> None:
        try:
            outcome.append(hosts.spawn_procs(per_host={"gpus": 1}, name=name))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    spawner = threading.Thread(target=spawn, daemon=True)
    spawner.start()
    testing.wait_for(lambda: mesh_pods(core, namespace, name), f"{name}'s pod, Pending")
    return hosts, spawner, outcome, key


def give_the_label(core, key: str, request) -> None:
    node = next(n.metadata.name for n in core.list_node().items if not n.spec.taints)
    core.patch_node(node, {"metadata": {"labels": {key: "yes"}}})
    request.addfinalizer(lambda: core.patch_node(node, {"metadata": {"labels": {key: None}}}))


def test_a_spawn_waiting_when_the_host_mesh_shuts_down_deletes_its_mesh(core, kube, custom, namespace, operator,
                                                                        request):
    hosts, spawner, outcome, key = spawn_waiting_for_a_node(core, kube, namespace, "hl-waiting")
    shutting = hosts.shutdown()
    assert not shutting.done()  # it waits for the spawn, whose pod cannot be placed yet
    give_the_label(core, key, request)
    spawner.join(timeout=180)
    assert not spawner.is_alive() and len(outcome) == 1
    assert isinstance(outcome[0], RuntimeError) and "already been shut down" in str(outcome[0]), outcome
    shutting.get(timeout=60)
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-waiting"), "the late spawn deleting its mesh")


def test_a_spawn_waiting_when_the_host_mesh_stops_deletes_its_mesh(core, kube, custom, namespace, operator, request):
    # Monarch's stop() drains the spawns in flight, then stops their procs: none outlives it.
    hosts, spawner, outcome, key = spawn_waiting_for_a_node(core, kube, namespace, "hl-stop-waiting")
    stopping = hosts.stop()
    assert not stopping.done()
    give_the_label(core, key, request)
    stopping.get(timeout=180)
    spawner.join(timeout=60)
    assert not spawner.is_alive() and len(outcome) == 1
    assert isinstance(outcome[0], RuntimeError) and "stop() came while this spawn waited" in str(outcome[0]), outcome
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-stop-waiting"), "stop() deleting the mesh spawned meanwhile")
    hosts.template = {}  # stop() keeps the host mesh usable: a node for every pod from here on
    again = hosts.spawn_procs(per_host={"gpus": 1}, name="hl-after-stop")
    assert again.spawn("rec", Recorder).echo.call_one(4).get(timeout=60) == 4
    hosts.shutdown().get(timeout=120)
    testing.wait_for(lambda: mesh_gone(custom, namespace, "hl-after-stop"), "shutdown() deleting what it spawned")
