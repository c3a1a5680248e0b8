"""``spawn_procs`` without ``per_host`` on Kubernetes: the CRD requires a perHost dimension, and
the API server's refusal of an empty one names spec.perHost, not the argument, so the client says
what to pass before any request."""

import pytest

from mesh_client._src.kubernetes.manifests import proc_mesh_manifest


def test_an_empty_per_host_is_refused_saying_what_to_pass():
    with pytest.raises(ValueError, match=r"per_host is empty: .*per_host=\{'procs': 1\}"):
        proc_mesh_manifest("m", hosts=2, per_host={})


def test_one_dimension_is_enough():
    assert proc_mesh_manifest("m", hosts=2, per_host={"procs": 1})["spec"]["perHost"] == [{"name": "procs", "size": 1}]
