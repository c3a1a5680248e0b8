"""The chart's access rules against the real API server: its client role reads no Secret, and its
admission policy lets only users who may create pods create (or change) a ProcMesh, with a token
Secret they made or may read.

Aspects:
- the client role alone: no Secret read (get, list) or create, and no ProcMesh (no `create pods`);
- the policy refuses a spec change from such a user too;
- with `create pods` and `create secrets` as well (rbac.clientRole.createMeshes), spawn_procs
  works end to end through the policy;
- a mesh naming another mesh's token Secret is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from mesh_client.kubernetes import KubernetesHostMesh
from tests.cluster import testing
from tests.integration.helm import support
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import create_mesh, kubectl, mesh_manifest, wait_ready

pytestmark = pytest.mark.cluster

WATCHED = "team-a"
#: A rule that grants nothing on meshes, Secrets or pod creation (service_account_client needs one).
EVENTS_READER = [{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
#: What rbac.clientRole.createMeshes adds.
MESH_CREATOR = [{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["create"]}]


@pytest.fixture(scope="module")
def release(cluster, namespaces, core):
    bindings = [{"namespace": WATCHED, "serviceAccount": sa} for sa in ("bob", "carol")]
    support.install(cluster, "namespaced.yaml",
                    sets={"rbac.clientRole.create": True, "rbac.clientRole.bindings": bindings})
    yield support.wait_operator_running(core)
    kubectl(cluster, "delete", "procmeshes", "--all", "-n", WATCHED, "--wait=true", check=False)
    support.uninstall(cluster)


def create_as(api_client: Any, body: dict[str, Any]) -> str | None:
    """The refusal of creating ``body`` as that client, or None (then the mesh is deleted)."""
    custom = client.CustomObjectsApi(api_client)
    try:
        custom.create_namespaced_custom_object("procmesh.io", "v1alpha1", WATCHED, "procmeshes",
                                               body)
    except client.ApiException as exc:
        return f"{exc.status} {exc.body}"
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", WATCHED, "procmeshes",
                                           body["metadata"]["name"])
    return None


def test_client_role_alone_reads_no_secret_and_creates_no_mesh(cluster, kube, release, core):
    core.create_namespaced_secret(WATCHED, {"metadata": {"name": "db-password"},
                                            "stringData": {"password": "hunter2"}})
    with testing.service_account_client(cluster, kube, WATCHED, "bob", EVENTS_READER) as bob:
        bobs = client.CoreV1Api(bob)
        testing.wait_for(lambda: _can(bob, "create", "procmeshes", "procmesh.io"),
                         "the chart's client role bound to bob")
        assert not _can(bob, "create", "secrets") and not _can(bob, "create", "pods")
        for read in (lambda: bobs.read_namespaced_secret("db-password", WATCHED),
                     lambda: bobs.list_namespaced_secret(WATCHED)):
            with pytest.raises(client.ApiException) as refused:
                read()
            assert refused.value.status == 403
        # RBAC lets bob create ProcMeshes; the admission policy (once loaded) does not.
        refusal = testing.wait_for(lambda: create_as(bob, mesh_manifest("bobs")),
                                   "the admission policy in force")
        assert refusal.startswith("403") and "creates pods" in refusal
        assert f"may not create pods in namespace {WATCHED}" in refusal


def test_spec_change_needs_pod_create_too(cluster, kube, release, custom):
    create_mesh(custom, WATCHED, "admins", perHost=[{"name": "procs", "size": 1}])
    with testing.service_account_client(cluster, kube, WATCHED, "dave", [
            {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"], "verbs": ["patch"]}]) as dave:
        def refusal() -> str | None:
            try:
                client.CustomObjectsApi(dave).patch_namespaced_custom_object(
                    "procmesh.io", "v1alpha1", WATCHED, "procmeshes", "admins",
                    {"spec": {"template": {"image": "evil.example/proc:1"}}})
            except client.ApiException as exc:
                return f"{exc.status} {exc.body}"
            return None
        assert "creates pods" in testing.wait_for(refusal, "the admission policy in force")


def test_creator_with_pod_create_spawns_through_the_policy(cluster, kube, release, custom):
    with testing.service_account_client(cluster, kube, WATCHED, "carol", MESH_CREATOR) as carol:
        testing.wait_for(lambda: _can(carol, "create", "procmeshes", "procmesh.io"),
                         "the chart's client role bound to carol")
        create_mesh(custom, WATCHED, "theirs", perHost=[{"name": "procs", "size": 1}])
        stolen = mesh_manifest("mine", tokenSecretName="theirs-token")
        refusal = testing.wait_for(lambda: create_as(carol, stolen), "the policy in force")
        assert "spec.tokenSecretName theirs-token is not named after this mesh" in refusal
        # Named after a longer mesh name that starts with this one's: the token Secret of a mesh
        # "mine-tokenizer" (generated), of a mesh "mine-token-x" (the Python client's name), or
        # of a mesh "mine-token" (its legacy name).
        for other in ("mine-tokenizer-token-x1y2z", "mine-token-x-token-1a2b3c4d", "mine-token-token"):
            refusal = create_as(carol, mesh_manifest("mine", tokenSecretName=other))
            assert refusal and f"spec.tokenSecretName {other} is not named after this mesh" in refusal, refusal
        for own in ("mine-token", "mine-token-1a2b3c4d"):
            assert create_as(carol, mesh_manifest("mine", tokenSecretName=own)) is None
        hosts = KubernetesHostMesh(hosts=1, namespace=WATCHED, api_client=carol, timeout=120)
        mesh = hosts.spawn_procs(per_host={"procs": 1}, name="carols")
        try:
            assert mesh.spawn("rec", Recorder).echo.call_one("ok").get() == "ok"
        finally:
            mesh.stop().get()
    wait_ready(custom, WATCHED, "theirs")


def _can(api_client: Any, verb: str, resource: str, group: str = "") -> bool:
    review = {"spec": {"resourceAttributes": {"namespace": WATCHED, "group": group,
                                              "resource": resource, "verb": verb}}}
    return bool(client.AuthorizationV1Api(api_client)
                .create_self_subject_access_review(review).status.allowed)
