"""A crashing container is restarted with back-off, and its restart count grows."""

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster


def test_crashing_container_restarts_with_growing_count(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, testing.python_pod(
        "crasher", "print('crashing'); raise SystemExit(7)", restart_policy="Always"))

    seen = []

    def restarted_three_times():
        status = core.read_namespaced_pod("crasher", namespace).status
        if not status.container_statuses:
            return None
        entry = status.container_statuses[0]
        seen.append(entry.restart_count)
        return entry if entry.restart_count >= 3 else None

    entry = testing.wait_for(restarted_three_times, "three restarts")

    assert seen == sorted(seen), "the restart count never goes down"
    assert len(set(seen)) >= 2, "the count was seen growing"
    assert entry.last_state.terminated.exit_code == 7
    assert entry.last_state.terminated.reason == "Error"
    # Between runs the container waits in CrashLoopBackOff; each run's output is kept.
    waiting = testing.wait_for(
        lambda: (s := core.read_namespaced_pod("crasher", namespace).status.container_statuses[0].state).waiting and s,
        "a back-off wait")
    assert waiting.waiting.reason == "CrashLoopBackOff"
    assert testing.pod_output(cluster, namespace, "crasher", run=1) == "crashing\n"
    assert testing.pod_output(cluster, namespace, "crasher", run=3) == "crashing\n"
    pod = core.read_namespaced_pod("crasher", namespace)
    assert pod.status.phase == "Running"
