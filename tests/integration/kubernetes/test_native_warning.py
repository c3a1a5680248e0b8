"""The missing native modules' warning of an async controller on Kubernetes names the user's
own await (spawn_procs_async, attach_async), not a line of threading.py: both wait for the mesh
on a thread of their own, whose stack holds no line of the user's.

Aspects: a controller whose import of _waits, _sends and _frames fails (a ``None`` in ``sys.modules``, as
in tests/integration/local/test_native_modules.py) spawns a mesh with ``spawn_procs_async``, or
attaches one with ``attach_async``: one warning, at the line awaited.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.integration.cli.support import env
from tests.integration.operator.support import ROOT, create_mesh

pytestmark = pytest.mark.cluster

CONTROLLER = textwrap.dedent(
    """
    import asyncio, sys
    sys.modules["mesh_client._src.runtime._waits"] = None
    sys.modules["mesh_client._src.runtime._sends"] = None
    sys.modules["mesh_client._src.wire._frames"] = None
    from mesh_client.kubernetes import KubernetesHostMesh, attach_async

    how, namespace, kubeconfig = sys.argv[1:4]

    async def main():
        if how == "spawn":
            hosts = KubernetesHostMesh(hosts=1, namespace=namespace, kubeconfig=kubeconfig, timeout=300)
            procs = await hosts.spawn_procs_async(per_host={"gpus": 1}, name="spawned")  # warned: spawn
        else:
            procs = await attach_async("made", namespace, kubeconfig=kubeconfig, timeout=300)  # warned: attach
        await procs.stop()
        print("stopped")

    asyncio.run(main())
    """
)
WARNED = "procmesh: the native call-path modules"


@pytest.mark.parametrize("how", ["spawn", "attach"])
def test_an_async_controller_is_warned_at_its_own_await(cluster, custom, namespace, operator, tmp_path, how):
    if how == "attach":
        create_mesh(custom, namespace, "made", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    script = tmp_path / "controller.py"
    script.write_text(CONTROLLER)
    environ = {k: v for k, v in env().items() if k != "PYTHONWARNINGS"}  # Python's default filters
    done = subprocess.run([sys.executable, str(script), how, namespace, str(cluster.kubeconfig)],
                          capture_output=True, text=True, env=environ, cwd=str(ROOT), timeout=400)
    assert done.returncode == 0 and done.stdout.splitlines() == ["stopped"], done.stderr[-3000:]
    lines = done.stderr.splitlines()
    at = [i for i, line in enumerate(lines) if WARNED in line]
    assert len(at) == 1 and lines[at[0]].startswith(f"{script}:"), done.stderr[-3000:]
    assert f"# warned: {how}" in lines[at[0] + 1]
