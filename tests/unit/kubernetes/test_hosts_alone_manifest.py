"""``spawn_procs()`` without ``per_host`` on Kubernetes asks for one proc per host, as Monarch's
``spawn_procs()`` gives: ``perHost: []``, a mesh whose only dimension is ``hosts``."""

from mesh_client._src.kubernetes.manifests import proc_mesh_manifest


def test_no_per_host_is_an_empty_per_host():
    assert proc_mesh_manifest("m", hosts=2, per_host={})["spec"]["perHost"] == []


def test_one_dimension_is_kept():
    assert proc_mesh_manifest("m", hosts=2, per_host={"procs": 1})["spec"]["perHost"] == [{"name": "procs", "size": 1}]
