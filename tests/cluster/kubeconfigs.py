"""Kubeconfig files for the test cluster's clients, with certificates embedded.

Self-contained files (no paths inside), so a kubeconfig can be copied or mounted anywhere.
JSON is valid YAML, so no YAML library is needed. Written by :mod:`tests.cluster.controlplane`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.cluster import pki


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(path: Path, server: str, ca_cert: Path, client: pki.KeyPair, user: str) -> Path:
    """Write a kubeconfig for ``user`` authenticating with ``client`` against ``server``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "procmesh", "cluster": {
            "server": server, "certificate-authority-data": _b64(ca_cert)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": _b64(client.cert), "client-key-data": _b64(client.key)}}],
        "contexts": [{"name": "procmesh", "context": {"cluster": "procmesh", "user": user}}],
        "current-context": "procmesh",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path
