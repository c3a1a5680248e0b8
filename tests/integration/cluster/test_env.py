"""A container sees the env its pod declares: values, downward API, Secret and ConfigMap keys."""

import json

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster

DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


def test_container_sees_the_declared_env(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"}, "data": {"level": "debug"}})
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    pod = testing.python_pod("env", DUMP, container={"env": [
        {"name": "GREETING", "value": "hi"},
        {"name": "EXPANDED", "value": "$(GREETING) there, $$(GREETING)"},
        {"name": "POD_NAME", **field("metadata.name")},
        {"name": "POD_NAMESPACE", **field("metadata.namespace")},
        {"name": "POD_UID", **field("metadata.uid")},
        {"name": "POD_IP", **field("status.podIP")},
        {"name": "NODE_NAME", **field("spec.nodeName")},
        {"name": "APP", **field("metadata.labels['app']")},
        {"name": "NOTE", **field("metadata.annotations['note']")},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
    ]})
    pod["metadata"].update(labels={"app": "demo"}, annotations={"note": "n1"})
    core.create_namespaced_pod(namespace, pod)

    done = testing.wait_for(
        lambda: (p := core.read_namespaced_pod("env", namespace)).status.phase == "Succeeded" and p, "pod to finish")
    env = json.loads(testing.pod_output(cluster, namespace, "env"))

    assert env["GREETING"] == "hi"
    assert env["EXPANDED"] == "hi there, $(GREETING)"
    assert env["POD_NAME"] == "env" and env["POD_NAMESPACE"] == namespace
    assert env["POD_UID"] == done.metadata.uid
    assert env["POD_IP"] == done.status.pod_ip and env["POD_IP"].startswith("127.")
    assert env["NODE_NAME"] == done.spec.node_name and env["NODE_NAME"]
    assert env["APP"] == "demo" and env["NOTE"] == "n1"
    assert env["TOKEN"] == "s3cret" and env["LEVEL"] == "debug"
    # In-cluster configuration points at the apiserver on loopback.
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == str(cluster.ports.apiserver)
    # No GPU asked for: the emulated runtime shows none.
    assert env["CUDA_VISIBLE_DEVICES"] == ""
