"""How long the client's API requests wait for the API server (``PROCMESH_API_TIMEOUT``), and what
its refusals say."""

import pytest
from kubernetes import client

from mesh_client._src import contract
from mesh_client._src.kubernetes import api
from mesh_client._src.kubernetes.errors import MeshNotFound


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, api.API_TIMEOUT_SECONDS),
        ({"PROCMESH_API_TIMEOUT": ""}, api.API_TIMEOUT_SECONDS),
        ({"PROCMESH_API_TIMEOUT": " 2.5 "}, 2.5),
        ({"PROCMESH_API_TIMEOUT": "600"}, 600.0),
        ({"PROCMESH_API_TIMEOUT": "0"}, None),  # no limit, as kubectl by default
    ],
)
def test_the_request_timeout_comes_from_the_environment(environ, expected):
    assert api.api_timeout_from(environ) == expected


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf"])
def test_a_bad_request_timeout_says_what_to_give(raw):
    with pytest.raises(ValueError, match=f"PROCMESH_API_TIMEOUT={raw!r} is not a number of seconds: give how long"):
        api.api_timeout_from({"PROCMESH_API_TIMEOUT": raw})


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
