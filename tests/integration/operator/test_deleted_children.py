"""Children deleted under a running mesh, against the real control plane.

Aspects:
- the API server honours ``dryRun=All`` on a Secret create as the operator relies on it
  (:mod:`procmesh_operator.secret_probes`): AlreadyExists for a Secret that is there, success
  and nothing stored for one that is not;
- a running mesh's headless Service and access Role deleted while nothing else happens: the
  operator's child watch brings both back (Warning events say so), with the resync an hour
  away, so that neither the periodic child check nor a replaced proc can be what did it;
- a RestartProc mesh whose token Secret, headless Service and access Role were deleted: the
  proc restarted next brings the Service and Role back (Warning events say so), the status says
  the Secret is gone and what to do (Degraded and Ready, TokenSecretMissing) while no new token
  is made under the running proc, ``attach`` stops at once with that message, and the way out
  the message gives (suspend, resume) starts every proc on a new token and clears it.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from kubernetes import client

from mesh_client._src import contract
from mesh_client.kubernetes import MeshNotReady, attach
from procmesh_operator import kubeclient
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def secret_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {"token": base64.b64encode(b"x").decode()}}


def test_the_api_server_answers_a_dry_run_create_by_existence(kube, namespace, core):
    core.create_namespaced_secret(namespace, secret_body("there"))
    path = kubeclient.core_path(namespace, "secrets")

    async def dry_runs() -> tuple[int, dict[str, Any]]:
        api = kubeclient.KubeClient(kube.configuration)
        try:
            with pytest.raises(kubeclient.ApiError) as there:
                await api.create(path, secret_body("there"), dry_run=True)
            return there.value.status, await api.create(path, secret_body("absent"),
                                                        dry_run=True)
        finally:
            await api.close()

    status, answered = asyncio.run(dry_runs())
    assert status == 409 and answered["metadata"]["name"] == "absent"
    assert [s.metadata.name for s in core.list_namespaced_secret(namespace).items
            if s.metadata.name in ("there", "absent")] == ["there"]  # nothing stored


def exists(read: Any, *args: str) -> bool:
    try:
        read(*args)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def test_a_deleted_service_and_role_come_back_at_once(operator, namespace, kube, custom, core):
    name = "watched-children"
    rbac = client.RbacAuthorizationV1Api(kube)
    role, service = contract.access_role_name(name), contract.service_name(name)
    with support.session_operator_with(operator, "--resync-seconds", "3600"):
        support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 1}])
        support.wait_ready(custom, namespace, name)
        uids = {"service": core.read_namespaced_service(service, namespace).metadata.uid,
                "role": rbac.read_namespaced_role(role, namespace).metadata.uid}
        core.delete_namespaced_service(service, namespace)
        rbac.delete_namespaced_role(role, namespace)
        # New objects (new uids), owned by the mesh, carrying its labels.
        testing.wait_for(lambda: exists(core.read_namespaced_service, service, namespace)
                         and exists(rbac.read_namespaced_role, role, namespace),
                         "the Service and the Role created again")
        again = {"service": core.read_namespaced_service(service, namespace).metadata,
                 "role": rbac.read_namespaced_role(role, namespace).metadata}
        assert all(again[k].uid != uids[k] for k in uids)
        mesh_uid = support.get_mesh(custom, namespace, name)["metadata"]["uid"]
        assert all([o.uid for o in m.owner_references] == [mesh_uid] for m in again.values())
        assert all(m.labels[contract.MESH_LABEL] == name for m in again.values())
        testing.wait_for(
            lambda: sorted(e.message.split()[1] for e in support.events(core, namespace, name)
                           if e.reason == "ChildRecreated" and e.type == "Warning")
            == sorted([role, service]) or None, "a ChildRecreated event for the Role and the Service")
        assert support.get_mesh(custom, namespace, name)["status"]["phase"] == "Ready"


def test_children_deleted_under_a_running_mesh(operator, namespace, kube, custom, core):
    name = "orphaned"
    support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 2}],
                        restartPolicy="RestartProc", maxRestarts=3)
    mesh = support.wait_ready(custom, namespace, name)
    secret = mesh["status"]["tokenSecretName"]
    token = support.token(core, namespace, name)
    rbac = client.RbacAuthorizationV1Api(kube)
    role, service = contract.access_role_name(name), contract.service_name(name)
    core.delete_namespaced_secret(secret, namespace)
    core.delete_namespaced_service(service, namespace)
    rbac.delete_namespaced_role(role, namespace)
    support.kill_proc(mesh["status"]["procs"][1]["address"], token)

    mesh = support.wait_condition(custom, namespace, name, "Degraded", "True",
                                  contract.TOKEN_SECRET_MISSING)
    degraded = support.condition(mesh, "Degraded")["message"]
    assert degraded.startswith(f"the token Secret {secret} was deleted while the mesh has procs")
    assert "Suspend the mesh and resume it" in degraded
    ready = support.condition(mesh, "Ready")
    assert ready["reason"] == contract.TOKEN_SECRET_MISSING and degraded in ready["message"]
    assert mesh["status"]["phase"] == "Failed"
    # The restart's reconcile checked the children before it wrote that status.
    assert exists(core.read_namespaced_service, service, namespace)
    assert exists(rbac.read_namespaced_role, role, namespace)
    assert not exists(core.read_namespaced_secret, secret, namespace)  # no new token: proc 0 runs
    recreated = testing.wait_for(
        lambda: sorted(e.message.split()[1] for e in support.events(core, namespace, name)
                       if e.reason == "ChildRecreated" and e.type == "Warning")
        == sorted([role, service]) or None, "a ChildRecreated event for the Role and the Service")
    assert recreated
    with pytest.raises(MeshNotReady, match=f"cannot become Ready: {contract.TOKEN_SECRET_MISSING}: "
                                           f"the token Secret {secret} was deleted"):
        attach(name, namespace, api_client=kube, timeout=120, progress=False)

    # The way out the message gives.
    support.patch_mesh(custom, namespace, name, {"suspend": True})
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, name), "the pods gone")
    support.patch_mesh(custom, namespace, name, {"suspend": False})
    mesh = support.wait_ready(custom, namespace, name)
    assert support.condition(mesh, "Degraded")["reason"] == "NoFailures"
    fresh = support.token(core, namespace, name)
    assert mesh["status"]["tokenSecretName"] == secret and fresh != token
    assert sorted(support.identify(p["address"], fresh)["rank"]
                  for p in mesh["status"]["procs"]) == [0, 1]
