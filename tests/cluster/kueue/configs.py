"""What Kueue is started with, and the queue objects the tests use: pure functions.

:func:`configuration` is a ``config.kueue.x-k8s.io/v1beta2`` Configuration (its types are in
the pinned module's ``apis/config/v1beta2/configuration_types.go``). Choices, each for running
as one process beside a test control plane (:mod:`.manager`):

- ``internalCertManagement.enable: false``: Kueue's own cert rotator makes a certificate for
  ``kueue-webhook-service.kueue-system.svc`` and injects its CA into webhook configurations and
  CRDs by name; nothing here resolves that name. Instead the harness signs a serving
  certificate for 127.0.0.1 with the cluster CA (the webhook server of controller-runtime needs
  one to start) and registers no webhook configuration at all: Kueue's webhooks for its own
  types only validate and add a ``resource-in-use`` finalizer, and those for job integrations
  act only on kinds we do not use. See tests/cluster/README.md, "Kueue".
- every listener on 127.0.0.1 with a port picked free (several clusters side by side); metrics
  off (``bindAddress: "0"``); the visibility server (a fixed port, 8082) off by its feature
  gate; no leader election (one replica).
- ``integrations.externalFrameworks``: ProcMesh is managed for Kueue by an external controller
  (our operator, which creates each mesh's Workload), so Kueue's pod integration, if enabled,
  would leave its pods alone.
- a high client QPS, so that the admission benchmark measures Kueue, not client throttling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
NAMESPACE = "kueue-system"
#: ``Kind.version.group`` as Kueue's integrations.externalFrameworks expects it.
PROCMESH_FRAMEWORK = "ProcMesh.v1alpha1.procmesh.io"


def configuration(*, webhook_port: int, health_port: int, cert_dir: Path,
                  wait_for_pods_ready: dict[str, Any] | None = None) -> str:
    """The Configuration file's text; ``wait_for_pods_ready``: its ``waitForPodsReady`` (none:
    off, Kueue's default)."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "integrations": {"frameworks": ["batch/job"], "externalFrameworks": [PROCMESH_FRAMEWORK]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    if wait_for_pods_ready is not None:
        config["waitForPodsReady"] = wait_for_pods_ready
    return yaml.safe_dump(config, sort_keys=False)


def resource_flavor(name: str, node_labels: dict[str, str] | None = None,
                    tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A ResourceFlavor: the nodes with ``node_labels`` (any node if None), whose taints
    ``tolerations`` tolerate; Kueue's job controllers add both to the pods they admit."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": spec}


def cluster_queue(name: str, flavor: str, quota: dict[str, str], *,
                  preemption: str = "LowerPriority", strategy: str = "StrictFIFO") -> dict[str, Any]:
    """A ClusterQueue with one flavor and ``quota`` (resource -> nominal quota), open to every
    namespace, that preempts ``preemption`` workloads of its own queue for a pending one."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [{
                "coveredResources": sorted(quota),
                "flavors": [{"name": flavor, "resources": [
                    {"name": r, "nominalQuota": q} for r, q in sorted(quota.items())]}],
            }],
        },
    }


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}
