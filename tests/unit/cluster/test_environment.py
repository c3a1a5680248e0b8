"""Container env resolution of the process node (pure functions)."""

import base64

import pytest

from tests.cluster.process_node import environment

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"a": "1"}, "annotations": {}},
    "spec": {"nodeName": "n0", "serviceAccountName": "sa", "containers": [
        {"name": "main", "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "250m"}}}]},
}


def _lookup(kind, namespace, name):
    objects = {
        ("secrets", "s"): {"kind": "Secret", "data": {"k": base64.b64encode(b"secret").decode()}},
        ("configmaps", "c"): {"kind": "ConfigMap", "data": {"k": "config", "X": "y"}},
    }
    return objects.get((kind, name))


def _env(env=(), env_from=(), base=None):
    container = {"name": "main", "env": list(env), "envFrom": list(env_from)}
    return environment.container_env(POD, container, pod_ip="127.10.0.5", host_ip="127.0.1.1",
                                     lookup=_lookup, allocatable={"cpu": "8"}, base=base)


def test_values_expand_earlier_variables_and_escape_dollars():
    env = _env([{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)-$(MISSING)-$$(A)"}], base={"H": "h"})
    assert env == {"H": "h", "A": "x", "B": "x-$(MISSING)-$(A)"}


def test_downward_api_fields():
    paths = ["metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels['a']",
             "spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.hostIP"]
    env = _env([{"name": f"V{i}", "valueFrom": {"fieldRef": {"fieldPath": p}}} for i, p in enumerate(paths)])
    assert list(env.values()) == ["p", "ns", "u1", "1", "n0", "sa", "127.10.0.5", "127.0.1.1"]


def test_resource_fields_with_divisors_and_node_fallback():
    refs = [{"resource": "limits.memory", "divisor": "1Mi"}, {"resource": "requests.cpu", "divisor": "1m"},
            {"resource": "limits.cpu"}]
    env = _env([{"name": f"R{i}", "valueFrom": {"resourceFieldRef": r}} for i, r in enumerate(refs)])
    assert env == {"R0": "1024", "R1": "250", "R2": "8"}


def test_secret_and_configmap_keys_and_env_from():
    env = _env([{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
                {"name": "O", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": True}}}],
               env_from=[{"configMapRef": {"name": "c"}, "prefix": "P_"}])
    assert env == {"P_X": "y", "P_k": "config", "S": "secret", "C": "config"}


def test_missing_reference_is_a_config_error():
    with pytest.raises(environment.ConfigError, match="not found"):
        _env([{"name": "S", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}])
