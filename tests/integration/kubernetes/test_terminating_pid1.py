"""A controller that is its container's first process (PID 1) still ends on SIGTERM.

The kernel delivers no signal at its default disposition to the first process of a PID
namespace, so the SIGTERM that :mod:`mesh_client._src.kubernetes.terminating` raises again after
deleting the meshes left such a controller running, its meshes gone, until the kubelet's SIGKILL.
A real PID namespace (``unshare``, as root, as CI runs) and a real signal; no mesh is needed for
the handler's ending.
"""

import os
import pathlib
import signal
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]

CONTROLLER = """
import sys, time
from mesh_client._src.kubernetes import terminating
terminating.install()
print("ready", flush=True)
time.sleep(60)
sys.exit(99)  # SIGTERM did not end it
"""


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def test_a_controller_that_is_pid_1_exits_143_on_sigterm():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(["unshare", "--pid", "--fork", sys.executable, "-c", CONTROLLER],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        (inner,) = _children(proc.pid)  # the controller, PID 1 inside its namespace
        (nspid,) = [line for line in pathlib.Path(f"/proc/{inner}/status").read_text().splitlines()
                    if line.startswith("NSpid:")]
        assert nspid.split()[-1] == "1"  # its pid in its own namespace
        os.kill(inner, signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # unshare passes its status on
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
