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
    assert done.spec.node_name in {n.name for n in cluster.nodes()}  # bound by the scheduler
    assert testing.pod_output(cluster, namespace, "hello") == "hello from ['a', 'b']\n"


def test_failing_command_fails_the_pod(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod("boom", "raise SystemExit(3)"))

    done = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("boom", namespace)).status.phase in ("Succeeded", "Failed") and p,
        "pod to finish")

    assert done.status.phase == "Failed"
    assert done.status.container_statuses[0].state.terminated.exit_code == 3


def test_init_containers_run_first_in_order(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    shared = {"volumeMounts": [{"name": "work", "mountPath": "/work-dir"}]}
    step = "import sys; open('/work-dir/steps', 'a').write(sys.argv[1] + '\\n')"
    pod = testing.python_pod("ordered", "print(open('/work-dir/steps').read(), end='')", container=shared)
    pod["spec"]["volumes"] = [{"name": "work", "emptyDir": {}}]
    pod["spec"]["initContainers"] = [
        {"name": f"init-{i}", "image": "ignored", "command": ["python", "-c", step, f"init-{i}"], **shared}
        for i in (1, 2)]
    core.create_namespaced_pod(namespace, pod)

    done = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("ordered", namespace)).status.phase in ("Succeeded", "Failed") and p,
        "pod to finish")

    assert done.status.phase == "Succeeded"
    assert [s.state.terminated.exit_code for s in done.status.init_container_statuses] == [0, 0]
    assert testing.pod_output(cluster, namespace, "ordered") == "init-1\ninit-2\n"
