"""The chart's RBAC is enough, and every rule matters: remove one and the loss shows (for a dra
mesh too: the resourceclaims rule). And it is no more: the operator reads no Secret and can bind
no Role (issue 12).

Installed in namespaced mode (a Role and a RoleBinding per watched namespace). A helm
post-renderer (drop_rule.py) takes one permission out of the operator's roles; the operator must
then report the 403 (in the mesh's Degraded condition, or in its log when it cannot even write
status), and the mesh must not become Ready. Not a silent retry.
"""

from __future__ import annotations

import json

import pytest

from tests.cluster import testing
from tests.integration.helm import support
from tests.integration.operator.support import (
    condition,
    create_mesh,
    get_mesh,
    kubectl,
    mesh_pods,
    wait_condition,
    wait_ready,
)

pytestmark = pytest.mark.cluster

WATCHED = "team-a"
OPERATOR_USER = f"system:serviceaccount:{support.RELEASE_NAMESPACE}:{support.FULLNAME}"


@pytest.fixture(scope="module")
def release(cluster, namespaces, core):
    support.install(cluster, "namespaced.yaml")
    yield support.wait_operator_running(core)
    kubectl(cluster, "delete", "procmeshes", "--all", "-n", WATCHED, "--wait=true", check=False)
    support.uninstall(cluster)


def logged(cluster, pod: str) -> list[str]:
    """The operator pod's JSON log records, each as its message and traceback."""
    log = support.operator_log(cluster, pod)
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [f"{r.get('message', '')}\n{r.get('exc_info', '')}" for r in records]


def can_i(cluster, verb: str, resource: str) -> bool:
    result = kubectl(cluster, "auth", "can-i", verb, resource, "-n", WATCHED,
                     "--as", OPERATOR_USER, check=False)
    return result.stdout.strip() == "yes"


def test_namespaced_install_reconciles_a_mesh(cluster, release, custom):
    create_mesh(custom, WATCHED, "full-rights")
    wait_ready(custom, WATCHED, "full-rights")
    # Namespaced mode: nothing namespaced is granted outside the watched namespaces.
    outside = kubectl(cluster, "auth", "can-i", "create", "pods", "-n", "default",
                      "--as", OPERATOR_USER, check=False).stdout.strip()
    assert outside == "no"


def test_operator_creates_mesh_roles_but_reads_no_secret_and_binds_nothing(cluster, release,
                                                                            custom):
    create_mesh(custom, WATCHED, "inert")
    mesh = wait_ready(custom, WATCHED, "inert")  # its access Role was created (the reconcile needs it)
    rules = kubectl(cluster, "get", "role", "inert-procmesh-access", "-n", WATCHED, "-o",
                    "jsonpath={.rules[1].resources[0]}:{.rules[1].resourceNames[0]}").stdout
    secret = mesh["status"]["tokenSecretName"]  # generated: create, never get
    assert secret.startswith("inert-token-") and rules == f"secrets:{secret}"
    # ... a grant of `get` on a Secret that the operator itself may not get: that is escalate.
    for verb, resource in [("get", "secrets"), ("list", "secrets"), ("watch", "secrets"),
                           ("create", "rolebindings"), ("bind", "roles"), ("update", "roles"),
                           ("patch", "roles"), ("delete", "roles")]:
        assert not can_i(cluster, verb, resource), f"the operator may {verb} {resource}"
    refused = kubectl(cluster, "create", "rolebinding", "self-grant", "-n", WATCHED,
                      "--role=inert-procmesh-access", f"--user={OPERATOR_USER}",
                      "--as", OPERATOR_USER, check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr


def test_without_escalate_the_mesh_role_is_refused(cluster, release, core, custom, tmp_path):
    support.install(cluster, "namespaced.yaml",
                    extra=support.post_renderer(tmp_path, "roles", "escalate"))
    try:
        create_mesh(custom, WATCHED, "no-escalate")
        mesh = wait_condition(custom, WATCHED, "no-escalate", "Degraded", "True")
        message = condition(mesh, "Degraded")["message"]
        assert "403" in message and "not currently held" in message, message
        assert not mesh_pods(core, WATCHED, "no-escalate")
    finally:
        support.install(cluster, "namespaced.yaml")
    wait_ready(custom, WATCHED, "no-escalate")


@pytest.mark.parametrize("resource,verb", [("secrets", "create"), ("roles", "create"),
                                           ("pods", "create")])
def test_missing_rule_shows_as_403_in_the_mesh_status(cluster, release, core, custom, tmp_path,
                                                      resource, verb):
    support.install(cluster, "namespaced.yaml",
                    extra=support.post_renderer(tmp_path, resource, verb))
    try:
        assert not can_i(cluster, verb, resource)
        name = f"no-{verb}-{resource}"
        create_mesh(custom, WATCHED, name)
        mesh = wait_condition(custom, WATCHED, name, "Degraded", "True")
        message = condition(mesh, "Degraded")["message"]
        assert "403" in message and f'cannot {verb} resource "{resource}"' in message, message
        assert condition(mesh, "Ready").get("status") != "True"
        assert not mesh_pods(core, WATCHED, name)
    finally:
        support.install(cluster, "namespaced.yaml")
    # With the rule back, the same mesh recovers: the failure was the rule, nothing else.
    wait_ready(custom, WATCHED, name)


@pytest.fixture(scope="module")
def dra_node(cluster):
    """A node with one emulated GPU published by the process node as the NVIDIA DRA driver."""
    from tests.cluster.process_node.config import NodeConfig

    cluster.add_node(NodeConfig("helm-dra", gpus=1, dra=True))
    return "helm-dra"


def test_missing_claims_rule_shows_as_403_for_a_dra_mesh(cluster, release, core, custom, tmp_path,
                                                         dra_node):
    support.install(cluster, "namespaced.yaml",
                    extra=support.post_renderer(tmp_path, "resourceclaims", "create"))
    try:
        assert not can_i(cluster, "create", "resourceclaims.resource.k8s.io")
        create_mesh(custom, WATCHED, "no-claims", perHost=[{"name": "gpus", "size": 1}],
                    gpus={"mode": "dra", "deviceClassName": "gpu.nvidia.com"})
        mesh = wait_condition(custom, WATCHED, "no-claims", "Degraded", "True")
        message = condition(mesh, "Degraded")["message"]
        assert "403" in message and 'cannot create resource "resourceclaims"' in message, message
        assert not mesh_pods(core, WATCHED, "no-claims")
    finally:
        support.install(cluster, "namespaced.yaml")
    mesh = wait_ready(custom, WATCHED, "no-claims")
    assert mesh["status"]["procs"][0]["gpu"].startswith("GPU-")  # slices listed: rbac.draGPUs
    kubectl(cluster, "delete", "pm", "no-claims", "-n", WATCHED, "--wait=true")


def test_missing_status_rule_shows_in_the_operator_log(cluster, release, core, custom,
                                                       tmp_path):
    support.install(cluster, "namespaced.yaml",
                    extra=support.post_renderer(tmp_path, "procmeshes/status", "patch"))
    try:
        assert not can_i(cluster, "patch", "procmeshes/status")
        [pod] = support.wait_operator_running(core)
        create_mesh(custom, WATCHED, "no-status")

        def refused() -> list[str]:
            return [t for t in logged(cluster, pod.metadata.name) if "no-status" in t
                    and "403 Forbidden" in t and 'cannot patch resource "procmeshes/status"' in t]

        lines = testing.wait_for(refused, "the operator logging the refused status write")
        assert "failed" in lines[0]
        assert not (get_mesh(custom, WATCHED, "no-status").get("status") or {}).get("readyProcs")
    finally:
        support.install(cluster, "namespaced.yaml")
    wait_ready(custom, WATCHED, "no-status")


@pytest.mark.parametrize("resource", ["services", "resourcequotas"])
def test_missing_watch_rule_shows_in_the_operator_log(cluster, release, core, custom, tmp_path,
                                                      resource):
    # The child watch (childwatch.py) only speeds up recreating a deleted Service, and the
    # quota watch (quotawatch.py) placing a mesh that waits for quota room: without either,
    # meshes still run, and the log says what is missing.
    support.install(cluster, "namespaced.yaml",
                    extra=support.post_renderer(tmp_path, resource, "list"))
    try:
        assert not can_i(cluster, "list", resource)
        # The rules changed, not the Deployment: its running pod's watches, listed before,
        # go on until the server ends them. A new pod lists at its start.
        [old] = support.wait_operator_running(core)
        kubectl(cluster, "delete", "pod", old.metadata.name, "-n", support.RELEASE_NAMESPACE)
        [pod] = testing.wait_for(
            lambda: [p for p in support.wait_operator_running(core)
                     if p.metadata.name != old.metadata.name] or None, "a new operator pod")

        def refused() -> list[str]:
            return [t for t in logged(cluster, pod.metadata.name)
                    if f"watch of /api/v1/namespaces/{WATCHED}/{resource} failed" in t and "403" in t]

        testing.wait_for(refused, f"the operator logging the refused {resource} watch")
        create_mesh(custom, WATCHED, f"no-watch-{resource}")
        wait_ready(custom, WATCHED, f"no-watch-{resource}")
    finally:
        support.install(cluster, "namespaced.yaml")
