"""A call to a proc gone from the network ends within keepalive's budget even when its bytes are
never acknowledged (runtime/streams.py, TCP_USER_TIMEOUT): keepalive probes only an idle link,
and without the bound a call sent after the cut waited for the kernel's retransmissions, about
15 minutes. The cut is real and private: the controller and its proc run in a network namespace
this test makes (``unshare -n``), where an iptables rule drops every segment the proc sends, so
the call's bytes reach the proc and no acknowledgement comes back; keepalive is scaled down (1 s
idle, 1 s apart, 2 probes: the link ends 3 s after the call's bytes were last acknowledged).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

CONTROLLER = textwrap.dedent(
    """
    import os, subprocess, sys
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    import mesh_client.actor
    from mesh_client import SupervisionError, this_host
    from mesh_client._src.runtime import streams
    from tests.integration.local.actors import Recorder

    mesh_client.actor.unhandled_fault_hook = lambda failure: print(f"fault: {failure}", flush=True)
    streams.KEEPALIVE_IDLE_SECONDS, streams.KEEPALIVE_INTERVAL_SECONDS, streams.KEEPALIVE_PROBES = 1, 1, 2
    mesh = this_host().spawn_procs(per_host={"procs": 1}, name="unacked")
    rec = mesh.spawn("rec", Recorder)
    assert rec.record.call_one("before").get(timeout=60) == 1
    port = mesh._group.addresses[0][1]
    subprocess.run(["iptables", "-I", "INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"],
                   check=True, capture_output=True, timeout=30)
    call = rec.record.call_one("after the cut")
    try:
        call.get(timeout=120)
        print("the call succeeded", flush=True)
    except SupervisionError as exc:
        print(f"failed: {exc}", flush=True)
    except TimeoutError:
        print("still waiting after 120 s", flush=True)
    os._exit(0)  # the proc is behind the rule: no orderly stop; it ends with the namespace's controller
    """
)


def test_a_call_whose_bytes_a_vanished_proc_never_acknowledges_fails_within_keepalives_budget():
    assert shutil.which("unshare") and shutil.which("iptables"), "unshare and iptables are needed"
    assert os.geteuid() == 0, "this test makes a network namespace: run the tests as root, as scripts/test does"
    env = {**os.environ, "PROCMESH_UNIX_LINKS": "0"}  # TCP, as between pods
    done = subprocess.run(["unshare", "--net", "--fork", "--kill-child", sys.executable, "-c", CONTROLLER],
                          capture_output=True, text=True, timeout=300, env=env)
    out = done.stdout
    assert "failed: " in out, (out, done.stderr[-3000:])
    assert "Connection timed out" in out, out
