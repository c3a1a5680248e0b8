"""Helpers for the chart's tests: helm and kubectl against the local control plane, rendering,
installing the chart so that the operator runs as a pod on the process node, and its logs.
Fixtures are in conftest.py next to this file; mesh helpers come from the operator's tests.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import yaml

from tests.cluster import binaries, controlplane, testing
from tests.integration.operator.support import ROOT, kubectl

CHART = ROOT / "charts" / "procmesh-operator"
VALUES = pathlib.Path(__file__).resolve().parent / "values"
RELEASE = "procmesh"
RELEASE_NAMESPACE = "procmesh-system"
FULLNAME = "procmesh-procmesh-operator"
#: The Kubernetes version of tests/cluster (helm built from source defaults to v1.20).
KUBE_VERSION = "1.36.5"
#: What a refused request looks like in the operator's log (kopf's and ours).
FORBIDDEN = re.compile(r"\b403\b|[Ff]orbidden|Not enough permissions")


def helm(cluster: controlplane.Cluster, *args: str, check: bool = True,
         input: str | None = None) -> subprocess.CompletedProcess[str]:
    home = cluster.root / "helm"
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig),
               HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"))
    result = subprocess.run([str(binaries.path("helm")), *args], input=input, env=env,
                            capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def value_args(*files: str, sets: dict[str, Any] | None = None) -> list[str]:
    args: list[str] = []
    for name in files:
        args += ["-f", str(VALUES / name)]
    for key, value in (sets or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


def render(cluster: controlplane.Cluster, *files: str, chart: pathlib.Path = CHART,
           sets: dict[str, Any] | None = None, release: str = RELEASE,
           namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
    out = helm(cluster, "template", release, str(chart), "-n", namespace,
               "--kube-version", KUBE_VERSION, *value_args(*files, sets=sets)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def process_node_sets(**extra: Any) -> dict[str, Any]:
    """Values that make the chart's pod run this checkout on the process node."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "operator")])
    return {"operator.extraEnv": [{"name": "PYTHONPATH", "value": path}], **extra}


def post_renderer(folder: pathlib.Path, resource: str, verb: str) -> list[str]:
    """helm arguments for a post-renderer that removes ``verb`` on ``resource`` (drop_rule.py)."""
    script = folder / "drop-rule"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} "
                      f"{pathlib.Path(__file__).with_name('drop_rule.py')} \"$@\"\n")
    script.chmod(0o755)
    return ["--post-renderer", str(script), "--post-renderer-args", resource,
            "--post-renderer-args", verb]


def install(cluster: controlplane.Cluster, *files: str, command: str = "upgrade",
            chart: pathlib.Path = CHART, sets: dict[str, Any] | None = None,
            extra: list[str] | None = None, release: str = RELEASE,
            namespace: str = RELEASE_NAMESPACE) -> None:
    """``helm upgrade --install`` (or ``install``) and wait until the operator pod is Ready."""
    verb = ["upgrade", "--install"] if command == "upgrade" else ["install"]
    helm(cluster, *verb, release, str(chart), "-n", namespace, "--create-namespace",
         "--wait", "--timeout", "180s", "-f", str(VALUES / "process-node.yaml"),
         *value_args(*files, sets={**process_node_sets(), **(sets or {})}), *(extra or []))


def uninstall(cluster: controlplane.Cluster, release: str = RELEASE,
              namespace: str = RELEASE_NAMESPACE) -> None:
    helm(cluster, "uninstall", release, "-n", namespace, "--wait", "--timeout", "120s",
         check=False)


def operator_pods(core: Any, release: str = RELEASE,
                  namespace: str = RELEASE_NAMESPACE) -> list[Any]:
    selector = f"app.kubernetes.io/name=procmesh-operator,app.kubernetes.io/instance={release}"
    return [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def operator_log(cluster: controlplane.Cluster, pod: str, namespace: str = RELEASE_NAMESPACE) -> str:
    return kubectl(cluster, "logs", "-n", namespace, pod, check=False).stdout


def forbidden_messages(cluster: controlplane.Cluster, pod: str,
                       namespace: str = RELEASE_NAMESPACE) -> list[str]:
    """The messages of the operator's (JSON) log that tell of a refused request, kopf's or ours."""
    log = operator_log(cluster, pod, namespace)
    assert log, "no operator output"
    messages = [json.loads(line).get("message", "") for line in log.splitlines()
                if line.startswith("{")]
    assert messages, log[-2000:]
    return [m for m in messages if FORBIDDEN.search(m)]


def wait_operator_running(core: Any, count: int = 1, release: str = RELEASE,
                          namespace: str = RELEASE_NAMESPACE) -> list[Any]:
    def ready() -> list[Any] | None:
        pods = operator_pods(core, release, namespace)
        ok = [p for p in pods if any(c.type == "Ready" and c.status == "True"
                                     for c in p.status.conditions or [])]
        return ok if len(ok) == count == len(pods) else None
    return testing.wait_for(ready, f"{count} ready operator pod(s)")
