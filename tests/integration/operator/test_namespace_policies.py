"""A namespace's policies against proc pods, on the real API server (its PodSecurity and
ResourceQuota admission): what the mesh says, and that it goes on once the cause is gone.

Aspects: a default mesh passes Pod Security "restricted"; an image of the user's is refused
there with what to set (PodRefused, phase Failed, ``procmesh wait`` fails at once with it) and
runs once the template sets it; a ResourceQuota with no room is a wait (WaitingForQuota, phase
Waiting) that ends when the quota is raised; one whose limit is below the whole mesh's pods is
a refusal (PodRefused: no room that frees makes the mesh Ready) that clears once it is raised.
"""

from __future__ import annotations

import pytest

from tests.cluster import testing
from tests.integration.cli.support import procmesh
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}


def test_pod_security_restricted(cluster, operator, core, custom, namespace):
    core.patch_namespace(namespace, {"metadata": {"labels": RESTRICTED}})
    support.create_mesh(custom, namespace, "plain", perHost=[{"name": "procs", "size": 2}])
    support.wait_ready(custom, namespace, "plain")  # the operator's defaults pass "restricted"

    support.create_mesh(custom, namespace, "own", perHost=[{"name": "procs", "size": 1}],
                        template={"image": "example.com/trainer:1"})
    mesh = support.wait_condition(custom, namespace, "own", "Ready", "False", "PodRefused")
    assert mesh["status"]["phase"] == "Failed"
    message = support.condition(mesh, "Degraded")["message"]
    assert "violates PodSecurity" in message and "runAsNonRoot" in message
    assert "spec.template.securityContext" in message
    waited = procmesh(cluster.kubeconfig, "wait", "own", "-n", namespace, "--timeout", "5m")
    assert waited.returncode == 1 and "cannot become Ready: PodRefused" in waited.stderr, waited.stderr

    support.patch_mesh(custom, namespace, "own", {"template": {
        "image": "example.com/trainer:1", "securityContext": {"runAsNonRoot": True}}})
    support.wait_ready(custom, namespace, "own")
    (pod,) = support.mesh_pods(core, namespace, "own")
    assert pod.spec.security_context.run_as_non_root is True
    assert pod.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    container = pod.spec.containers[0].security_context
    assert container.capabilities.drop == ["ALL"] and container.allow_privilege_escalation is False


def pods_quota(core, namespace, pods):
    """A ResourceQuota of ``pods`` pods, once the quota controller has counted the namespace
    (before that it admits nothing)."""
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "pods"},
                                                      "spec": {"hard": {"pods": str(pods)}}})
    testing.wait_for(lambda: (core.read_namespaced_resource_quota("pods", namespace).status.hard
                              or {}).get("pods") == str(pods), "quota counted")


def test_a_full_quota_is_waited_for(cluster, operator, core, custom, namespace):
    pods_quota(core, namespace, 2)
    # Another pod holds one of the two: room for the mesh frees once it goes, or the quota grows.
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "other"},
        "spec": {"nodeSelector": {"example.com/no-such-node": "x"},
                 "containers": [{"name": "c", "image": "example.com/other:1"}]}})
    support.create_mesh(custom, namespace, "q", hosts=2, perHost=[{"name": "procs", "size": 1}],
                        placement={"hosts": "Any"})
    mesh = support.wait_condition(custom, namespace, "q", "Ready", "False", "WaitingForQuota")
    assert mesh["status"]["phase"] == "Waiting"
    message = support.condition(mesh, "Progressing")["message"]
    assert "exceeded quota" in message and "once the namespace's ResourceQuota has room" in message

    core.patch_namespaced_resource_quota("pods", namespace, {"spec": {"hard": {"pods": "5"}}})
    support.wait_ready(custom, namespace, "q")  # the operator's retries find the room


def test_a_quota_that_can_never_hold_the_mesh_is_a_refusal(cluster, operator, core, custom, namespace):
    pods_quota(core, namespace, 1)
    support.create_mesh(custom, namespace, "big", hosts=2, perHost=[{"name": "procs", "size": 1}],
                        placement={"hosts": "Any"})
    mesh = support.wait_condition(custom, namespace, "big", "Ready", "False", "PodRefused")
    assert mesh["status"]["phase"] == "Failed"
    message = support.condition(mesh, "Degraded")["message"]
    assert "exceeded quota" in message and "The mesh's 2 proc pods together ask for more pods" in message
    waited = procmesh(cluster.kubeconfig, "wait", "big", "-n", namespace, "--timeout", "5m")
    assert waited.returncode == 1 and "cannot become Ready: PodRefused" in waited.stderr, waited.stderr

    core.patch_namespaced_resource_quota("pods", namespace, {"spec": {"hard": {"pods": "2"}}})
    support.wait_ready(custom, namespace, "big")  # a refusal is retried too: fixed, it runs
