"""Access by mesh through Kubernetes RBAC, against the real API server and operator.

Aspects:
- a service account bound to mesh A's Role (made by the operator) attaches to A and calls an
  actor; it cannot attach to B (MeshAccessDenied naming B's Role) nor read B's token or any
  other Secret;
- a mesh's token opens no other mesh's procs;
- a mesh spawned from Python brings its own token Secret (created, never read, by a client that
  may not read Secrets), owned by the mesh and collected with it;
- proc pods get no service-account token unless the template asks;
- the operator's token Secret has a name the API server generated, recorded in the mesh's status;
  Secrets planted before the mesh (at the legacy name ``<mesh>-token`` and at a guessed
  generated name) are never its token, and a mesh deleted and created again at once does not
  adopt the old mesh's Secret;
- the token rotates by deleting the Secret of a suspended mesh; deleting it under running procs
  changes nothing;
- a Secret whose token was changed under running procs fails ``attach`` with a message naming
  that Secret and the way out (suspend and resume), and that way out works;
- ``procmesh grant`` lets a subject use a mesh for as long as that mesh exists: its RoleBinding
  goes with the mesh, so a later mesh of the same name (made by someone else) is not theirs.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from kubernetes import client

from mesh_client._src.wire import errors as wire_errors
from mesh_client.kubernetes import KubernetesHostMesh, MeshAccessDenied, attach
from tests.cluster import testing
from tests.integration.cli.support import procmesh
from tests.integration.local.actors import Recorder
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Enough to follow a mesh's pods while waiting; grants nothing on meshes or Secrets.
POD_READER = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
#: What spawn_procs needs (the chart's client role, less what it adds for logs and forwards);
#: ``patch`` renews the lease of the meshes it spawns.
CREATOR = [
    {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"],
     "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
]


def allowed(api_client: Any, namespace: str, verb: str, resource: str, name: str,
            group: str = "") -> bool:
    review = {"spec": {"resourceAttributes": {"namespace": namespace, "group": group,
                                              "resource": resource, "verb": verb, "name": name}}}
    return bool(client.AuthorizationV1Api(api_client)
                .create_self_subject_access_review(review).status.allowed)


def bind_mesh_role(kube: Any, api_client: Any, namespace: str, mesh: str, account: str) -> None:
    """What an admin does to grant ``account`` mesh ``mesh``: bind the operator's Role."""
    client.RbacAuthorizationV1Api(kube).create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"{account}-uses-{mesh}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": f"{mesh}-procmesh-access"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    testing.wait_for(lambda: allowed(api_client, namespace, "get", "procmeshes", mesh,
                                     "procmesh.io"), f"{account} may get {mesh}")


def test_mesh_role_grants_that_mesh_and_nothing_else(cluster, kube, custom, core, namespace,
                                                     operator):
    for name in ("team-a", "team-b"):
        support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 1}])
    core.create_namespaced_secret(namespace, {"metadata": {"name": "db-password"},
                                              "stringData": {"password": "hunter2"}})
    support.wait_ready(custom, namespace, "team-a")
    with testing.service_account_client(cluster, kube, namespace, "alice", POD_READER) as alice:
        bind_mesh_role(kube, alice, namespace, "team-a", "alice")
        mesh = attach("team-a", namespace, api_client=alice, timeout=120, progress=False)
        try:
            assert mesh.spawn("rec", Recorder).echo.call_one("hello").get() == "hello"
        finally:
            mesh.stop().get()
        with pytest.raises(MeshAccessDenied) as info:
            attach("team-b", namespace, api_client=alice, timeout=120, progress=False)
        text = str(info.value)
        assert "--role=team-b-procmesh-access" in text and "'watch' on procmeshes team-b" in text
        assert "run code in the mesh's procs" in text  # what binding it hands over
        alices = client.CoreV1Api(alice)
        for secret in (support.token_secret(core, namespace, "team-b"), "db-password"):
            with pytest.raises(client.ApiException) as refused:
                alices.read_namespaced_secret(secret, namespace)
            assert refused.value.status == 403
        with pytest.raises(client.ApiException) as refused:
            alices.list_namespaced_secret(namespace)
        assert refused.value.status == 403


def test_a_token_opens_its_own_mesh_only(custom, core, namespace, operator):
    for name in ("tok-a", "tok-b"):
        support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 1}])
    a, b = (support.wait_ready(custom, namespace, n)["status"]["procs"][0]["address"]
            for n in ("tok-a", "tok-b"))
    token_a = support.token(core, namespace, "tok-a")
    assert support.identify(a, token_a)["pid"] > 0
    with pytest.raises((OSError, wire_errors.WireError)):
        support.identify(b, token_a)


def test_spawned_mesh_brings_its_own_secret(cluster, kube, core, namespace, operator):
    with testing.service_account_client(cluster, kube, namespace, "creator", CREATOR) as creator:
        hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=creator, timeout=120)
        mesh = hosts.spawn_procs(per_host={"procs": 2}, name="own")
        try:
            assert list(mesh.spawn("rec", Recorder).echo.call(3).get().values()) == [3, 3]
            body = client.CustomObjectsApi(kube).get_namespaced_custom_object(
                "procmesh.io", "v1alpha1", namespace, "procmeshes", "own")
            secret_name = body["spec"]["tokenSecretName"]
            assert secret_name.startswith("own-token-")
            secret = core.read_namespaced_secret(secret_name, namespace)
            assert [o.uid for o in secret.metadata.owner_references] == [body["metadata"]["uid"]]
            names = [s.metadata.name for s in core.list_namespaced_secret(namespace).items]
            assert [n for n in names if n.startswith("own-token")] == [secret_name]  # the operator made none
            role = client.RbacAuthorizationV1Api(kube).read_namespaced_role(
                "own-procmesh-access", namespace)
            assert role.rules[1].resource_names == [secret_name]
            with pytest.raises(client.ApiException) as refused:  # it never needed to read it
                client.CoreV1Api(creator).read_namespaced_secret(secret_name, namespace)
            assert refused.value.status == 403
        finally:
            mesh.stop().get()
    testing.wait_for(lambda: secret_name not in [
        s.metadata.name for s in core.list_namespaced_secret(namespace).items],
        "the token Secret collected with its mesh")


def _service_account_files() -> list[str]:
    path = pathlib.Path(SA_DIR)
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def test_proc_pods_get_no_service_account_token(kube, custom, core, namespace, operator):
    support.create_mesh(custom, namespace, "tokenless", perHost=[{"name": "procs", "size": 1}])
    support.create_mesh(custom, namespace, "asks", perHost=[{"name": "procs", "size": 1}],
                        template={"automountServiceAccountToken": True})
    for name, files in (("tokenless", []), ("asks", ["ca.crt", "namespace", "token"])):
        support.wait_ready(custom, namespace, name)
        [pod] = support.mesh_pods(core, namespace, name)
        projected = [v for v in pod.spec.volumes if v.projected is not None]
        assert bool(projected) == bool(files)
        mesh = attach(name, namespace, api_client=kube, timeout=120, progress=False)
        try:
            assert mesh.run(_service_account_files).get() == [files]
        finally:
            mesh.stop().get()


def test_token_rotates_by_deleting_the_secret_of_a_suspended_mesh(kube, custom, core, namespace,
                                                                 operator):
    support.create_mesh(custom, namespace, "rot", perHost=[{"name": "procs", "size": 2}])
    support.wait_ready(custom, namespace, "rot")
    before = support.token(core, namespace, "rot")
    secret = support.token_secret(core, namespace, "rot")
    support.patch_mesh(custom, namespace, "rot", {"suspend": True})
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "rot"), "pods removed")
    core.delete_namespaced_secret(secret, namespace)
    support.patch_mesh(custom, namespace, "rot", {"suspend": False})
    support.wait_ready(custom, namespace, "rot")
    assert support.token_secret(core, namespace, "rot") == secret  # the name its Role grants
    after = support.token(core, namespace, "rot")
    assert after != before and len(after) == 64
    mesh = attach("rot", namespace, api_client=kube, timeout=120, progress=False)
    try:
        assert list(mesh.spawn("rec", Recorder).echo.call(1).get().values()) == [1, 1]
    finally:
        mesh.stop().get()


def test_secret_deleted_under_running_procs_is_not_recreated(kube, custom, core, namespace,
                                                            operator):
    support.create_mesh(custom, namespace, "keep", perHost=[{"name": "procs", "size": 1}])
    mesh_body = support.wait_ready(custom, namespace, "keep")
    token = support.token(core, namespace, "keep")
    secret = support.token_secret(core, namespace, "keep")
    core.delete_namespaced_secret(secret, namespace)
    support.patch_mesh(custom, namespace, "keep", {"template": {"labels": {"touch": "1"}}})
    support.wait_ready(custom, namespace, "keep")  # reconciled at the new generation
    names = [s.metadata.name for s in core.list_namespaced_secret(namespace).items]
    assert secret not in names  # no new token under procs that hold the old one
    assert not [n for n in names if n.startswith("keep-token")]
    address = mesh_body["status"]["procs"][0]["address"]
    assert support.identify(address, token)["pid"] > 0  # the running proc still takes it


def test_a_mesh_recreated_at_once_gets_a_secret_of_its_own(kube, custom, core, namespace,
                                                           operator):
    support.create_mesh(custom, namespace, "again", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "again")
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                           "again", propagation_policy="Background")
    uid = support.create_mesh(custom, namespace, "again",
                              perHost=[{"name": "procs", "size": 1}])["metadata"]["uid"]

    def own_secret() -> bool:
        # Adopting the old mesh's Secret would leave none at all once garbage collection
        # removes it: the operator creates no Secret for a mesh whose pods exist.
        name = support.token_secret(core, namespace, "again")
        found = [s for s in core.list_namespaced_secret(namespace).items
                 if s.metadata.name == name]
        return bool(found) and [o.uid for o in found[0].metadata.owner_references] == [uid]

    testing.wait_for(own_secret, "a token Secret owned by the new mesh")

    def own_pods_ready() -> bool:
        pods = support.mesh_pods(core, namespace, "again")
        mesh = support.get_mesh(custom, namespace, "again")
        return bool(pods) and all(p.metadata.owner_references[0].uid == uid for p in pods) \
            and support.condition(mesh, "Ready").get("status") == "True"

    testing.wait_for(own_pods_ready, "the new mesh's own pods Ready")
    mesh = attach("again", namespace, api_client=kube, timeout=120, progress=False)
    try:
        assert mesh.spawn("rec", Recorder).echo.call_one(5).get() == 5
    finally:
        mesh.stop().get()


def test_planted_secrets_are_never_the_meshs_token(custom, core, namespace, operator):
    guess = "planted-token-bcdfg"  # the shape of a generated name: guessed, not given
    for name in ("planted-token", guess):
        core.create_namespaced_secret(namespace, {"metadata": {"name": name},
                                                  "stringData": {"token": "0" * 64}})
    support.create_mesh(custom, namespace, "planted", perHost=[{"name": "procs", "size": 1}])
    mesh = support.wait_ready(custom, namespace, "planted")
    secret = support.token_secret(core, namespace, "planted")
    assert secret.startswith("planted-token-") and secret != guess
    [pod] = support.mesh_pods(core, namespace, "planted")
    assert [v.secret.secret_name for v in pod.spec.volumes if v.secret] == [secret]
    role = client.RbacAuthorizationV1Api(core.api_client).read_namespaced_role(
        "planted-procmesh-access", namespace)
    assert role.rules[1].resource_names == [secret]
    token = support.token(core, namespace, "planted")
    assert token != b"0" * 64
    address = mesh["status"]["procs"][0]["address"]
    assert support.identify(address, token)["mesh"] == "planted"
    with pytest.raises((OSError, wire_errors.WireError)):  # the planted token opens nothing
        support.identify(address, b"0" * 64)


def test_a_token_changed_under_running_procs_names_the_secret_and_the_way_out(kube, custom, core, namespace,
                                                                             operator):
    support.create_mesh(custom, namespace, "edited", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "edited")
    secret = support.token_secret(core, namespace, "edited")
    core.patch_namespaced_secret(secret, namespace, {"stringData": {"token": "1" * 64}})
    with pytest.raises(wire_errors.AuthenticationError) as info:
        attach("edited", namespace, api_client=kube, timeout=120, progress=False)
    text = str(info.value)
    assert f"Secret {namespace}/{secret}" in text and "changed or recreated while the mesh ran" in text
    assert "suspend the mesh and resume it" in text
    support.patch_mesh(custom, namespace, "edited", {"suspend": True})  # the way out it names
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "edited"), "pods removed")
    support.patch_mesh(custom, namespace, "edited", {"suspend": False})
    support.wait_ready(custom, namespace, "edited")
    mesh = attach("edited", namespace, api_client=kube, timeout=120, progress=False)
    try:
        assert mesh.spawn("rec", Recorder).echo.call_one(7).get() == 7
    finally:
        mesh.stop().get()


def test_a_grant_ends_with_its_mesh_and_never_covers_a_later_one_of_its_name(cluster, kube, custom, core,
                                                                            namespace, operator):
    support.create_mesh(custom, namespace, "reused", perHost=[{"name": "procs", "size": 1}])
    support.wait_ready(custom, namespace, "reused")
    with testing.service_account_client(cluster, kube, namespace, "grantee", POD_READER) as grantee:
        result = procmesh(cluster.kubeconfig, "grant", "reused", "-n", namespace,
                          "--serviceaccount", f"{namespace}:grantee")
        assert result.returncode == 0, result.stderr
        testing.wait_for(lambda: allowed(grantee, namespace, "get", "procmeshes", "reused", "procmesh.io"),
                         "the grant took effect")
        mesh = attach("reused", namespace, api_client=grantee, timeout=120, progress=False)
        try:
            assert mesh.spawn("rec", Recorder).echo.call_one("mine").get() == "mine"
        finally:
            mesh.stop().get()
        custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes", "reused")
        rbac = client.RbacAuthorizationV1Api(kube)
        testing.wait_for(lambda: not [b for b in rbac.list_namespaced_role_binding(namespace).items
                                      if b.role_ref.name == "reused-procmesh-access"],
                         "the grant collected with its mesh")
        testing.wait_for(lambda: not [r for r in rbac.list_namespaced_role(namespace).items
                                      if r.metadata.name == "reused-procmesh-access"],
                         "the old mesh's Role collected")
        support.create_mesh(custom, namespace, "reused", perHost=[{"name": "procs", "size": 1}])  # someone else's
        support.wait_ready(custom, namespace, "reused")
        with pytest.raises(MeshAccessDenied) as info:
            attach("reused", namespace, api_client=grantee, timeout=120, progress=False)
        assert f"procmesh grant reused -n {namespace}" in str(info.value)


def test_a_mesh_being_deleted_is_not_granted(cluster, kube, custom, namespace, operator):
    """The binding would go with the mesh, and meanwhile give its token (the CLI said the grant
    lasted "until that mesh is deleted" of a mesh already being deleted)."""
    body = support.mesh_manifest("going", perHost=[{"name": "procs", "size": 1}])
    body["metadata"]["finalizers"] = ["tests.procmesh.io/hold"]
    custom.create_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes", body)
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes", "going")
    try:
        result = procmesh(cluster.kubeconfig, "grant", "going", "-n", namespace, "--user", "someone")
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert f"ProcMesh {namespace}/going: it is being deleted" in result.stderr, result.stderr
        assert "grant the mesh made after it instead" in result.stderr, result.stderr
        rbac = client.RbacAuthorizationV1Api(kube)
        assert not [b for b in rbac.list_namespaced_role_binding(namespace).items
                    if b.role_ref.name == "going-procmesh-access"]
    finally:
        custom.patch_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes", "going",
                                              {"metadata": {"finalizers": None}})
