"""The DeviceClass the NVIDIA DRA GPU driver's Helm chart installs, for clusters with DRA nodes.

A real cluster gets ``gpu.nvidia.com`` from the driver's chart
(deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml in
kubernetes-sigs/dra-driver-nvidia-gpu); here :meth:`tests.cluster.controlplane.Cluster.add_node`
creates it, as the admin, the first time a node with ``dra=True`` joins.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

NAME = "gpu.nvidia.com"
PATH = "/apis/resource.k8s.io/v1/deviceclasses"


def gpu_device_class() -> dict[str, Any]:
    """The driver chart's class of full GPUs (its selector, verbatim)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": NAME},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
    }


def ensure(server: str, context: ssl.SSLContext) -> None:
    """Create the class unless it exists (an admin ``context``: client certificate loaded)."""
    request = urllib.request.Request(
        server + PATH, data=json.dumps(gpu_device_class()).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context):
            return
    except urllib.error.HTTPError as error:
        if error.code != 409:
            raise
