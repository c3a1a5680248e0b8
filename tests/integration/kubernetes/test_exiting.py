"""A controller whose background threads are in API calls when it exits ends with status 0
(runtime/exiting.py), against the real API server.

Aspects: threads of ours that call the API server in a loop when the program ends are told to
stop and waited for before the interpreter finalizes, so none wakes inside TLS then (which
aborts the process with SIGABRT and nothing on stderr); so are the output forwarder's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.integration.cli.support import env
from tests.integration.operator.support import ROOT

pytestmark = pytest.mark.cluster

PROGRAM = textwrap.dedent(
    """
    import sys, threading, time
    from mesh_client._src.kubernetes import api as api_mod
    from mesh_client._src.kubernetes.output import OutputForwarder
    from mesh_client._src.runtime import exiting

    api = api_mod.KubeApi(api_mod.make_api_client(sys.argv[1]), sys.argv[2])
    OutputForwarder(api, "gone", ["gone-0", "gone-1"]).start()  # follows pods that do not exist
    stop = threading.Event()

    def call_in_a_loop():
        while not stop.is_set():
            api.pod("not-there")  # one HTTPS round trip each (a 404)

    for _ in range(3):
        thread = threading.Thread(target=call_in_a_loop, daemon=True)
        exiting.track(thread, stop.set)
        thread.start()
    time.sleep(0.3)
    print("exiting", flush=True)
    """
)


def test_threads_in_api_calls_end_before_the_interpreter_does(cluster, namespace):
    # Without the wait, most runs of this program ended with SIGABRT (-6) and empty stderr.
    for _ in range(8):
        done = subprocess.run([sys.executable, "-c", PROGRAM, str(cluster.kubeconfig), namespace], cwd=ROOT,
                              env=env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        assert done.stdout == "exiting\n" and done.stderr == "", (done.stdout, done.stderr)
