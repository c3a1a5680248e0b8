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
        # A named get: the API server's Status names the object when only the object is missing;
        # a path it does not serve (no CRD) answers a bare "404 page not found".
        no_crd = kube._refused(client.ApiException(status=404, reason="Not Found"), "get", contract.PLURAL,
                               "trainer")
        assert not isinstance(no_crd, MeshNotFound)
        assert str(no_crd).startswith("this cluster has no ProcMesh resource type")
        gone = client.ApiException(status=404, reason="Not Found")
        gone.body = ('{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound",'
                     '"message":"procmeshes.procmesh.io \\"trainer\\" not found",'
                     '"details":{"name":"trainer","group":"procmesh.io","kind":"procmeshes"},"code":404}')
        one = kube._refused(gone, "get", contract.PLURAL, "trainer")
        assert isinstance(one, MeshNotFound) and "ProcMesh rl/trainer does not exist" in str(one)
    finally:
        kube.api_client.close()
