"""Monarch names on procs whose host procmesh does not know, and on ports, without procs.

Aspects: ``host_mesh`` of one proc that no local host started (a pod, a worker, an attached
mesh) says what to use; ``Port.return_undeliverable`` is True, takes False, refuses a non-bool.
"""

import pytest

from mesh_client._src.actor.ports import Port
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import Shape


def test_a_proc_of_no_known_host_says_where_to_spawn_instead():
    group = ProcGroup("pod", [("127.0.0.1", 9)], b"token", ["pod[0]"])  # never connected
    with pytest.raises(RuntimeError, match=r"no host mesh here: .*KubernetesHostMesh.*this_host\(\) in an actor"):
        _ = ProcMesh(group, Shape(["gpus"], [1])).host_mesh


def test_return_undeliverable_is_a_flag_of_the_port():
    port = Port("p-1")
    assert port.return_undeliverable is True
    port.return_undeliverable = False
    assert port.return_undeliverable is False
    with pytest.raises(TypeError, match=r"True or False; got int: 1"):
        port.return_undeliverable = 1
