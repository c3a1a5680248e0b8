"""RBAC is enforced: a service account without a binding is refused, and a Role grants access."""

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster import testing

pytestmark = pytest.mark.cluster


def _client_for_token(cluster, kube, token):
    configuration = client.Configuration()
    configuration.host = kube.configuration.host
    configuration.ssl_ca_cert = str(cluster.layout.pki / "ca.crt")
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


def test_unprivileged_service_account_is_refused(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}).status.token

    with _client_for_token(cluster, kube, token) as as_nobody:
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(as_nobody).list_namespaced_secret(namespace)
        assert refused.value.status == 403
        assert f"system:serviceaccount:{namespace}:nobody" in refused.value.body

        rbac = client.RbacAuthorizationV1Api(kube)
        rbac.create_namespaced_role(namespace, {"metadata": {"name": "read-pods"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": "nobody-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}]})

        pods = testing.wait_for(lambda: client.CoreV1Api(as_nobody).list_namespaced_pod(namespace), "pods listed")
        assert pods.items == []
        with pytest.raises(ApiException) as still_refused:
            client.CoreV1Api(as_nobody).list_namespaced_secret(namespace)
        assert still_refused.value.status == 403
