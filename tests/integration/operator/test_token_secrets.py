"""The token Secret's crash window, against the real control plane: an operator process that
ends abruptly between a mesh's token Secret and its access Role, a mesh an older operator made
(``<mesh>-token``, named by its Role, no ``status.tokenSecretName``), and the longest mesh name
(the API server cuts a generated name's prefix).

Aspects:
- killed right after the Secret's create (before the name is in status) or right after the
  status write (before the Role): the next operator makes the mesh Ready, its Role, pods and
  clients (``attach``) all on one recorded Secret whose token opens the procs; the first case's
  Secret stays an orphan owned by the mesh (collected with it), never adopted;
- an older operator's mesh keeps ``<mesh>-token`` and its token, now recorded in status;
- a mesh of the longest name becomes Ready on a generated name the API server cut to 63
  characters (which the operator must still take as its own).

The kill is the operator's test-only ``--test-exit-after`` (``os._exit`` right after that
step, as abrupt as a SIGKILL), so the window is hit every time rather than raced. The session's
operator is stopped for it and started again as it was.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes import client

from mesh_client._src import contract
from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.local.actors import Recorder
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def secrets_of(core: Any, namespace: str, mesh: str) -> dict[str, Any]:
    return {s.metadata.name: s for s in core.list_namespaced_secret(namespace).items
            if s.metadata.name.startswith(f"{mesh}-token")}


def role_of(core: Any, namespace: str, mesh: str) -> Any | None:
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    try:
        return rbac.read_namespaced_role(f"{mesh}-procmesh-access", namespace)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def assert_one_secret_throughout(kube: Any, custom: Any, core: Any, namespace: str,
                                 mesh: dict[str, Any]) -> str:
    """Status, Role and pods name one Secret; its token opens every proc, and attach finds it."""
    name = mesh["metadata"]["name"]
    secret = mesh["status"]["tokenSecretName"]
    assert role_of(core, namespace, name).rules[1].resource_names == [secret]
    for pod in support.mesh_pods(core, namespace, name):
        assert [v.secret.secret_name for v in pod.spec.volumes if v.secret] == [secret]
    token = support.token(core, namespace, name)
    assert sorted(support.identify(p["address"], token)["rank"]
                  for p in mesh["status"]["procs"]) == list(range(len(mesh["status"]["procs"])))
    attached = attach(name, namespace, api_client=kube, timeout=120, progress=False)
    try:
        replies = attached.spawn("rec", Recorder).echo.call(7).get().values()
        assert list(replies) == [7] * len(mesh["status"]["procs"])
    finally:
        attached.stop().get()
    return secret


@pytest.mark.parametrize("point", ["token-secret-created", "token-secret-recorded"])
def test_an_operator_killed_between_secret_and_role_leaves_no_stuck_mesh(
        point, operator, namespace, kube, custom, core):
    name = "crash-created" if point == "token-secret-created" else "crash-recorded"
    with support.session_operator_stopped(operator):
        operator.start("--test-exit-after", point, namespaces=[namespace])
        uid = support.create_mesh(custom, namespace, name,
                                  perHost=[{"name": "procs", "size": 2}])["metadata"]["uid"]
        proc = operator.proc
        assert proc is not None
        testing.wait_for(lambda: proc.poll() is not None, f"the operator ended at {point}")
        assert proc.returncode == 137
        [first] = secrets_of(core, namespace, name)
        assert role_of(core, namespace, name) is None and not support.mesh_pods(core, namespace,
                                                                                name)
        status = support.get_mesh(custom, namespace, name).get("status") or {}
        assert status.get("tokenSecretName") == (first if point.endswith("recorded") else None)
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        assert not ready or ready[0]["status"] != "True"  # no client was told Ready

    mesh = support.wait_ready(custom, namespace, name)
    secret = assert_one_secret_throughout(kube, custom, core, namespace, mesh)
    found = secrets_of(core, namespace, name)
    if point.endswith("recorded"):
        assert secret == first and list(found) == [first]
    else:  # the first Secret was never recorded: an orphan of the mesh, not its token
        assert secret != first and sorted(found) == sorted([first, secret])
        assert [o.uid for o in found[first].metadata.owner_references] == [uid]
        custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace,
                                               "procmeshes", name)
        testing.wait_for(lambda: not secrets_of(core, namespace, name),
                         "both Secrets collected with their mesh")


def test_an_older_operators_mesh_keeps_its_token_secret(operator, namespace, kube, custom, core):
    """What an operator before status.tokenSecretName left of a mesh with no pods: <mesh>-token,
    then the access Role naming it, and a status without the field."""
    name = "legacy"
    token = "1a" * 32
    with support.session_operator_stopped(operator):
        mesh = support.create_mesh(custom, namespace, name,
                                   perHost=[{"name": "procs", "size": 2}])
        owner = [{"apiVersion": "procmesh.io/v1alpha1", "kind": "ProcMesh", "name": name,
                  "uid": mesh["metadata"]["uid"], "controller": True}]
        core.create_namespaced_secret(namespace, {
            "metadata": {"name": f"{name}-token", "ownerReferences": owner},
            "data": {"token": base64.b64encode(token.encode()).decode()}})
        client.RbacAuthorizationV1Api(kube).create_namespaced_role(namespace, {
            "metadata": {"name": f"{name}-procmesh-access", "ownerReferences": owner},
            "rules": [{"apiGroups": ["procmesh.io"], "resources": ["procmeshes"],
                       "resourceNames": [name], "verbs": ["get", "watch"]},
                      {"apiGroups": [""], "resources": ["secrets"],
                       "resourceNames": [f"{name}-token"], "verbs": ["get"]}]})
        custom.patch_namespaced_custom_object_status(
            "procmesh.io", "v1alpha1", namespace, "procmeshes", name,
            {"status": {"observedGeneration": 1}})

    mesh = support.wait_ready(custom, namespace, name)
    assert assert_one_secret_throughout(kube, custom, core, namespace, mesh) == f"{name}-token"
    assert support.token(core, namespace, name) == token.encode()  # the old token, kept
    assert list(secrets_of(core, namespace, name)) == [f"{name}-token"]  # no other made


def test_the_longest_mesh_name_gets_a_generated_secret(operator, namespace, kube, custom, core):
    name = "l" * contract.MAX_MESH_NAME
    support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 1}])
    mesh = support.wait_ready(custom, namespace, name)
    secret = assert_one_secret_throughout(kube, custom, core, namespace, mesh)
    assert len(secret) == 63 and secret.startswith(f"{name}-token")
