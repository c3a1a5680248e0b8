"""A pod's proc server stopped by SIGTERM exits 143, not 0 (contract.SIGTERM_EXIT, which the
operator renders into every proc pod).

Nobody of its mesh stops a pod's proc that way (STOP does): the cluster does (an eviction, a
drain), and an exit 0 made the kubelet call an evicted proc's pod Succeeded, dropping its
Evicted reason (tests/e2e: test_an_idle_proc_evicted_by_the_kubelet_...). Aspects: a proc
server with the pod's environment exits 143 on SIGTERM; one started by hand (or under systemd)
without it, and one a local controller stops with SIGTERM on purpose, exit 0. Real processes,
real signals.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from mesh_client._src import contract


def rendering_env() -> dict[str, str]:
    """The PROCMESH_* values the operator renders into a proc pod (rendering.proc_env)."""
    from procmesh_operator import rendering
    from tests.unit.operator import builders

    mesh = builders.mesh("m")
    return {e["name"]: e["value"] for e in rendering.proc_env(mesh, 0, rendering.ProcPlacement())
            if "value" in e}


@pytest.mark.parametrize("told, status", [(True, 128 + signal.SIGTERM), (False, 0)])
def test_a_proc_server_stopped_by_sigterm_exits_as_its_environment_says(told, status):
    env = {**os.environ, contract.TOKEN: "t" * 32, contract.LISTEN_HOST: "127.0.0.1", contract.PORT: "0"}
    if told:  # as the operator renders it into a proc pod
        env.update({k: v for k, v in rendering_env().items() if k == contract.SIGTERM_EXIT})
    server = subprocess.Popen([sys.executable, "-m", "mesh_client.proc_server"], env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on 127.0.0.1:" in line, line
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == status
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_local_proc_stopped_with_sigterm_by_its_controller_exits_0():
    with subprocess.Popen([sys.executable, "-c", LOCAL], stdout=subprocess.PIPE, text=True) as controller:
        out, _ = controller.communicate(timeout=120)
    assert "exit codes: [0]" in out, out


LOCAL = """
import signal
import mesh_client.actor
from mesh_client import this_host
mesh_client.actor.unhandled_fault_hook = lambda failure: None  # the proc's end is expected (else it ends this script)
from tests.integration.local.actors import Recorder
mesh = this_host().spawn_procs(per_host={"procs": 1}, name="termed")
assert mesh.spawn("rec", Recorder).record.call_one(1).get(timeout=60) == 1
launcher = mesh._group.owner
launcher.processes[0].send_signal(signal.SIGTERM)
print("exit codes:", [launcher.processes[0].wait(timeout=60)], flush=True)
"""
