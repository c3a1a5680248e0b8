"""What the client says when the API server refuses a request."""

from kubernetes import client

from mesh_client._src import contract
from mesh_client._src.kubernetes import api
from mesh_client._src.kubernetes.errors import MeshNotFound


def test_a_cluster_without_the_crd_is_told_so_not_a_missing_mesh():
    kube = api.KubeApi(client.ApiClient(client.Configuration()), "rl")
    try:
        missing = client.ApiException(status=404, reason="Not Found")
        listed = kube._refused(missing, "list", contract.PLURAL)
        assert not isinstance(listed, MeshNotFound)
        assert str(listed).startswith("this cluster has no ProcMesh resource type (the CRD procmeshes.procmesh.io")
        one = kube._refused(missing, "get", contract.PLURAL, "trainer")
        assert isinstance(one, MeshNotFound) and "ProcMesh rl/trainer does not exist" in str(one)
    finally:
        kube.api_client.close()
