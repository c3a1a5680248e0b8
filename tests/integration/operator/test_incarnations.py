"""A mesh deleted and created again at once under the same name: the new incarnation's status
counts only the pods its uid controls.

Aspects: while the earlier mesh's pods still run (same names, same label, Ready), the new mesh
is not Ready, gives no client their addresses, and waits for them (Degraded on the earlier
mesh's Role, then Progressing=WaitingForPreviousPods; its Secret is no obstacle: the new mesh's
has a generated name of its own); once they are gone it creates its own,
and its Ready comes from pods whose controller ownerReference is the new uid, one per rank.

The earlier mesh is deleted with propagationPolicy Orphan, so its children stay as they were
(garbage collection only strips their ownerReferences) for as long as the test needs: the states
are reached by events, not by racing the garbage collector. The Background case, where the
collector removes them on its own, is tests/integration/kubernetes/test_access.py
``test_a_mesh_recreated_at_once_gets_a_secret_of_its_own``.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

NAME = "again"


def _gone(read: Any) -> bool:
    try:
        read()
        return False
    except client.ApiException as e:
        return e.status == 404


def _not_ready_on(mesh: dict[str, Any], addresses: set[str]) -> None:
    status = mesh.get("status") or {}
    assert support.condition(mesh, "Ready").get("status") != "True", support.dump(status)
    assert status.get("readyProcs", 0) == 0, support.dump(status)
    assert not {p.get("address") for p in status.get("procs") or []} & addresses


def test_mesh_created_again_at_once_is_ready_only_on_its_own_pods(operator, namespace, custom,
                                                                   core):
    support.create_mesh(custom, namespace, NAME, perHost=[{"name": "procs", "size": 2}])
    earlier = support.wait_ready(custom, namespace, NAME)
    earlier_pods = {p.metadata.uid for p in support.mesh_pods(core, namespace, NAME)}
    earlier_addresses = {p["address"] for p in earlier["status"]["procs"]}
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                           NAME, propagation_policy="Orphan")
    testing.wait_for(lambda: _gone(lambda: support.get_mesh(custom, namespace, NAME)),
                     "the earlier mesh deleted")
    uid = support.create_mesh(custom, namespace, NAME,
                              perHost=[{"name": "procs", "size": 2}])["metadata"]["uid"]

    # The earlier mesh's Role blocks the reconcile: it must not report the old pods Ready.
    mesh = support.wait_condition(custom, namespace, NAME, "Degraded", "True", "ReconcileError")
    _not_ready_on(mesh, earlier_addresses)
    assert mesh["status"]["tokenSecretName"] != earlier["status"]["tokenSecretName"]
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    for kind, lister, deleter in (
            ("Secret", core.list_namespaced_secret, core.delete_namespaced_secret),
            ("Service", core.list_namespaced_service, core.delete_namespaced_service),
            ("Role", rbac.list_namespaced_role, rbac.delete_namespaced_role)):
        orphans = [o.metadata.name for o in lister(namespace).items
                   if o.metadata.name.startswith(NAME) and not o.metadata.owner_references]
        assert len(orphans) == 1, (kind, orphans)  # the earlier mesh's, now ownerless
        deleter(orphans[0], namespace)

    # Its own Secret, Role and Service now; the ranks' names are still taken by the old pods.
    mesh = support.wait_condition(custom, namespace, NAME, "Progressing", "True",
                                  "WaitingForPreviousPods")
    _not_ready_on(mesh, earlier_addresses)
    pods = support.mesh_pods(core, namespace, NAME)
    assert {p.metadata.uid for p in pods} == earlier_pods  # nothing created beside them
    assert all(p.status.phase == "Running" for p in pods)  # still running: a real hazard

    for pod in pods:
        core.delete_namespaced_pod(pod.metadata.name, namespace)
    mesh = support.wait_ready(custom, namespace, NAME)
    pods = support.mesh_pods(core, namespace, NAME)
    assert sorted(p.metadata.name for p in pods) == [f"{NAME}-0", f"{NAME}-1"]
    assert not {p.metadata.uid for p in pods} & earlier_pods
    for pod in pods:
        [controller] = [o for o in pod.metadata.owner_references if o.controller]
        assert controller.uid == uid
    ips = {p.status.pod_ip for p in pods}
    assert {p["address"].rsplit(":", 1)[0] for p in mesh["status"]["procs"]} == ips
    token = support.token(core, namespace, NAME)
    assert sorted(support.identify(p["address"], token)["rank"]
                  for p in mesh["status"]["procs"]) == [0, 1]
