"""The operator's own labels: the Service selector matches every child's labels."""

from mesh_client._src import contract
from procmesh_operator import names


def test_selector_matches_labels():
    labels = names.mesh_labels("x")
    assert all(labels[k] == v for k, v in names.mesh_selector("x").items())
    assert labels[contract.MESH_LABEL] == "x"
