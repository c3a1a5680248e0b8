"""A pod gets its service-account token and CA, and in-cluster config reaches the apiserver."""

import json

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster

WHOAMI = """
import json, pathlib
from kubernetes import client, config
sa = pathlib.Path('/var/run/secrets/kubernetes.io/serviceaccount')
config.load_incluster_config()
review = client.AuthenticationV1Api().create_self_subject_review({'apiVersion': 'authentication.k8s.io/v1', 'kind': 'SelfSubjectReview'})
print(json.dumps({
    'files': sorted(p.name for p in sa.iterdir()),
    'namespace': (sa / 'namespace').read_text(),
    'user': review.status.user_info.username,
    'pod': review.status.user_info.extra.get('authentication.kubernetes.io/pod-name'),
}))
"""


def test_pod_uses_its_service_account_token_in_cluster(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "worker"}})
    pod = testing.python_pod("whoami", WHOAMI, serviceAccountName="worker")
    core.create_namespaced_pod(namespace, pod)

    testing.wait_for(lambda: core.read_namespaced_pod("whoami", namespace).status.phase in ("Succeeded", "Failed"),
                     "pod to finish")
    seen = json.loads(testing.pod_output(cluster, namespace, "whoami").splitlines()[-1])

    assert seen["files"] == ["ca.crt", "namespace", "token"]
    assert seen["namespace"] == namespace
    assert seen["user"] == f"system:serviceaccount:{namespace}:worker"
    assert seen["pod"] == ["whoami"]  # the token is bound to this pod
