"""Helpers for tests that run against the local cluster: waiting, pod manifests, pod output.

Waiting is level-based (poll the API until a predicate holds, with a generous ceiling that only
turns a hang into a failure); nothing here asserts on durations. Used by
:mod:`tests.cluster.pytest_plugin` and the tests under ``tests/integration/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from tests.cluster import controlplane

T = TypeVar("T")
Obj = dict[str, Any]

#: Ceiling for every wait: long enough never to be the thing a test measures.
WAIT_SECONDS = 120.0


class WaitTimeout(AssertionError):
    """The awaited state never came; the message says what was last seen."""


def wait_for(check: Callable[[], T | None], what: str, timeout: float = WAIT_SECONDS,
             interval: float = 0.2) -> T:
    """Call ``check`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except Exception as error:  # noqa: BLE001 - keep polling through transient API errors
            last = error
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise WaitTimeout(f"gave up waiting for {what}; last seen: {last!r}")
        time.sleep(interval)


def python_pod(name: str, code: str, *, restart_policy: str = "Never", **extra: Any) -> Obj:
    """A pod whose one container (``main``) runs ``python -c code``; ``extra`` merges into spec."""
    container: Obj = {"name": "main", "image": "ignored.invalid/python:3", "command": ["python", "-c", code]}
    container.update(extra.pop("container", {}))
    spec: Obj = {"containers": [container], "restartPolicy": restart_policy,
                 "terminationGracePeriodSeconds": 5}
    spec.update(extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def pod_output(cluster: controlplane.Cluster, namespace: str, name: str, container: str = "main",
               run: int | None = None) -> str:
    """What a container printed (stdout and stderr), read from its node's folder.

    ``run`` picks one run (1 = the first); by default the latest.
    """
    files = sorted(cluster.root.glob(f"nodes/*/pods/{namespace}_{name}_*/{container}-*.log"),
                   key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    if not files:
        return ""
    chosen = files[-1] if run is None else files[run - 1]
    return chosen.read_text(errors="replace")


def all_output(cluster: controlplane.Cluster, namespace: str | None = None, since: float = 0.0) -> str:
    """Every container output of ``namespace`` (or modified after ``since``), with headers."""
    pattern = f"nodes/*/pods/{namespace}_*/*.log" if namespace else "nodes/*/pods/*/*.log"
    parts = []
    for path in sorted(cluster.root.glob(pattern)):
        if namespace or path.stat().st_mtime >= since:
            node = path.parts[-4]
            parts.append(f"--- {node}/{path.parent.name}/{path.name} ---\n{path.read_text(errors='replace')}")
    return "\n".join(parts)


def service_account_client(cluster: controlplane.Cluster, kube: Any, namespace: str, name: str,
                           rules: list[dict[str, Any]]) -> Any:
    """An ApiClient acting as a new service account that a Role grants exactly ``rules``.

    Waits until the first rule's grant is visible. The caller closes the client.
    """
    from kubernetes import client

    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    config = client.Configuration()
    config.host = kube.configuration.host
    config.ssl_ca_cert = str(cluster.layout.pki / "ca.crt")
    config.api_key = {"authorization": f"Bearer {token}"}
    api_client = client.ApiClient(config)
    review = {"spec": {"resourceAttributes": {
        "namespace": namespace, "group": rules[0]["apiGroups"][0], "resource": rules[0]["resources"][0],
        "verb": rules[0]["verbs"][0]}}}
    wait_for(lambda: client.AuthorizationV1Api(api_client).create_self_subject_access_review(review).status.allowed,
             f"the {name} role took effect")
    return api_client
