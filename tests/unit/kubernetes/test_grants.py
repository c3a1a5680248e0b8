"""The RoleBinding of ``procmesh grant``: the mesh's Role, one subject, owned by that very mesh."""

import pytest

from mesh_client._src.kubernetes import grants

MESH = {"metadata": {"name": "trainer", "namespace": "rl", "uid": "uid-1"}}


def test_the_binding_is_owned_by_the_mesh_and_binds_its_role():
    binding = grants.render(MESH, "user", "alice@example.com")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "trainer-procmesh-access"}
    assert binding["metadata"]["ownerReferences"] == [
        {"apiVersion": "procmesh.io/v1alpha1", "kind": "ProcMesh", "name": "trainer", "uid": "uid-1"}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "alice@example.com"}]
    assert binding["metadata"]["name"].startswith("trainer-procmesh-access-user-")
    assert grants.owned_by(binding, MESH)
    assert not grants.owned_by(binding, {"metadata": {"name": "trainer", "uid": "uid-2"}})


def test_subjects_are_named_as_kubectl_names_them():
    assert grants.subject("serviceaccount", "rl:job") == {"kind": "ServiceAccount", "name": "job", "namespace": "rl"}
    assert grants.subject("group", "ml")["kind"] == "Group"
    with pytest.raises(ValueError, match="<namespace>:<name>"):
        grants.subject("serviceaccount", "job")


def test_one_binding_name_per_subject():
    names = {grants.binding_name("m", k, n) for k, n in
             [("user", "a"), ("user", "b"), ("group", "a"), ("serviceaccount", "ns:a")]}
    assert len(names) == 4
    assert grants.binding_name("m", "user", "a") == grants.binding_name("m", "user", "a")
