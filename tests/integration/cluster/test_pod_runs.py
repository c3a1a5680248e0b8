"""A pod's command runs as a process on the process node, and its output is kept."""

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster


def test_pod_runs_its_command_and_succeeds(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    code = "import sys; print('hello from', sys.argv[1:])"
    pod = testing.python_pod("hello", code, container={"args": ["a", "b"]})
    # command + args: `python -c code a b`.
    pod["spec"]["containers"][0]["command"] = ["python", "-c", code]
    core.create_namespaced_pod(namespace, pod)

    done = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("hello", namespace)).status.phase in ("Succeeded", "Failed") and p,
        "pod to finish")

    assert done.status.phase == "Succeeded"
    state = done.status.container_statuses[0].state.terminated
    assert state.exit_code == 0 and state.reason == "Completed"
    assert done.spec.node_name == "node-0"
    assert testing.pod_output(cluster, namespace, "hello") == "hello from ['a', 'b']\n"


def test_failing_command_fails_the_pod(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod("boom", "raise SystemExit(3)"))

    done = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("boom", namespace)).status.phase in ("Succeeded", "Failed") and p,
        "pod to finish")

    assert done.status.phase == "Failed"
    assert done.status.container_statuses[0].state.terminated.exit_code == 3
