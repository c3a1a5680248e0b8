"""Deleting an owner garbage-collects the pods it owns (and their processes stop)."""

import os

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster import testing

pytestmark = pytest.mark.cluster

SLEEP = "import os, time; print(os.getpid(), flush=True); time.sleep(3600)"


def _pods(core, namespace):
    return core.list_namespaced_pod(namespace, label_selector="app=owned").items


def test_deleting_a_replicaset_collects_its_pods(cluster, kube, namespace):
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    template = testing.python_pod("unused", SLEEP, restart_policy="Always")
    template = {"metadata": {"labels": {"app": "owned"}}, "spec": template["spec"]}
    apps.create_namespaced_replica_set(namespace, {
        "metadata": {"name": "owner"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "owned"}}, "template": template}})

    pods = testing.wait_for(
        lambda: (ps := _pods(core, namespace)) and len(ps) == 2 and all(p.status.phase == "Running" for p in ps) and ps,
        "two Running pods")
    assert all(p.metadata.owner_references[0].name == "owner" for p in pods)
    pids = [int(testing.wait_for(lambda p=p: testing.pod_output(cluster, namespace, p.metadata.name), "pid"))
            for p in pods]

    apps.delete_namespaced_replica_set("owner", namespace, propagation_policy="Background")
    testing.wait_for(lambda: not _pods(core, namespace), "pods collected")

    with pytest.raises(ApiException) as error:
        apps.read_namespaced_replica_set("owner", namespace)
    assert error.value.status == 404
    assert not any(os.path.exists(f"/proc/{pid}/cmdline") and open(f"/proc/{pid}/cmdline").read() for pid in pids)


def test_deleting_any_owner_collects_its_pod(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    pod = testing.python_pod("child", SLEEP, restart_policy="Always")
    pod["metadata"].update(labels={"app": "owned"}, ownerReferences=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}])
    core.create_namespaced_pod(namespace, pod)
    testing.wait_for(lambda: core.read_namespaced_pod("child", namespace).status.phase == "Running", "Running")

    core.delete_namespaced_config_map("owner", namespace)

    testing.wait_for(lambda: not _pods(core, namespace), "pod collected")
