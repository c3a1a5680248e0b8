"""``KubernetesHostMesh.spawn_procs()`` without ``per_host``, as Monarch's: one proc per host,
a mesh of extent ``{hosts: N}``, against the real control plane and operator.

Aspects: the ProcMesh asks for ``perHost: []``; each proc's point is its host alone, in the
actor and in ``status.procs``; ``attach`` to it gives the same extent; the torchrun environment
makes each proc its own group of one (LOCAL_RANK 0, LOCAL_WORLD_SIZE 1, GROUP_RANK its host).
"""

from __future__ import annotations

import pytest

from mesh_client.kubernetes import KubernetesHostMesh, attach
from mesh_client.spmd import setup_torch_elastic_env
from tests.cluster import testing
from tests.integration.local.actors import Recorder
from tests.integration.local.test_spmd import Collective
from tests.integration.operator.support import get_mesh, mesh_gone

pytestmark = pytest.mark.cluster


def test_spawn_procs_without_per_host_gives_one_proc_per_host(kube, custom, namespace, operator):
    hosts = KubernetesHostMesh(hosts=2, namespace=namespace, api_client=kube, timeout=180)
    procs = hosts.spawn_procs(name="solo")
    assert str(procs.extent) == "{hosts: 2}" and procs.sizes == {"hosts": 2}
    stored = get_mesh(custom, namespace, "solo")
    assert stored["spec"]["perHost"] == []
    assert [p["coords"] for p in sorted(stored["status"]["procs"], key=lambda p: p["rank"])] == [
        {"hosts": 0}, {"hosts": 1}]
    where = procs.spawn("rec", Recorder).where.call().get(timeout=60)
    assert sorted(info["rank"]["hosts"] for _, info in where) == [0, 1]
    assert all(set(info["rank"]) == {"hosts"} for _, info in where)

    setup_torch_elastic_env(procs)
    envs = procs.spawn("c", Collective).env.call().get(timeout=60)
    for point, env in envs:
        assert (env["RANK"], env["GROUP_RANK"]) == (str(point["hosts"]), str(point["hosts"]))
        assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["WORLD_SIZE"], env["GROUP_WORLD_SIZE"]) == (
            "0", "1", "2", "2")
    seen = attach("solo", namespace, api_client=kube, timeout=60)
    assert str(seen.extent) == "{hosts: 2}"
    hosts.shutdown().get(timeout=120)
    testing.wait_for(lambda: mesh_gone(custom, namespace, "solo"), "shutdown() deleting the mesh")
