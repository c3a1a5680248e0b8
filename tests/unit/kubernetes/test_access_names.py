"""The client finds a mesh's token Secret and access Role by the names the operator gives them."""

from mesh_client._src.kubernetes import api
from procmesh_operator import specs


def test_token_secret_name_is_the_operators():
    for spec in ({}, {"tokenSecretName": "trainer-token-1f2e"}):
        body = {"metadata": {"name": "trainer"}, "spec": {"perHost": [], **spec}}
        assert api.token_secret_name(body) == specs.parse(body).token_secret
