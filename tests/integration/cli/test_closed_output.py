"""The CLI whose output's reader has gone (``procmesh logs -f MESH | head -1``), against the real
control plane: every command stops at once with status 141 (as a program killed by SIGPIPE) and
no error line. ``logs -f`` used to say that each pod's stream had ended and wait for its proc to
restart, forever."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration.cli.support import env
from tests.integration.operator.support import ROOT, create_mesh, wait_ready

pytestmark = pytest.mark.cluster


def closed_output(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A CLI run whose standard output is a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "mesh_client.cli", "--kubeconfig", kubeconfig, *args],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, env=env(),
                              cwd=str(ROOT))
    finally:
        os.close(write)


@pytest.mark.parametrize("command", [["get"], ["describe", "piped"], ["logs", "piped"], ["logs", "piped", "-f"]])
def test_a_closed_output_ends_the_command_quietly(cluster, custom, namespace, operator, command):
    create_mesh(custom, namespace, "piped", hosts=1, perHost=[{"name": "procs", "size": 3}])
    wait_ready(custom, namespace, "piped")
    result = closed_output(str(cluster.kubeconfig), *command, "-n", namespace)
    assert (result.returncode, result.stderr) == (141, "")

