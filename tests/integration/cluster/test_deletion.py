"""Deleting a pod stops its process: SIGTERM first, and the pod object goes away."""

import os

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster import testing

pytestmark = pytest.mark.cluster

SERVE = """
import os, signal, sys, time
def bye(signum, frame):
    print('got SIGTERM', flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print(os.getpid(), flush=True)
while True:
    time.sleep(1)
"""


def _gone(core, namespace, name):
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        return error.status == 404
    return False


def test_deleting_a_pod_stops_its_process(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod("sleeper", SERVE, restart_policy="Always"))
    testing.wait_for(lambda: core.read_namespaced_pod("sleeper", namespace).status.phase == "Running", "Running")
    pid = int(testing.wait_for(lambda: testing.pod_output(cluster, namespace, "sleeper").split("\n")[0], "pid"))
    assert os.path.exists(f"/proc/{pid}")

    core.delete_namespaced_pod("sleeper", namespace)
    testing.wait_for(lambda: _gone(core, namespace, "sleeper"), "pod object removed")

    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
    assert testing.pod_output(cluster, namespace, "sleeper").splitlines()[-1] == "got SIGTERM"
