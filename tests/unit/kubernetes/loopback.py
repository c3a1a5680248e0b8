"""A kubeconfig for an HTTP server of a test's own on loopback, so ``make_api_client`` (and with
it the client's retry policy and socket options) is what talks to it."""

from __future__ import annotations

import json
from pathlib import Path


def kubeconfig_for(folder: Path, port: int) -> Path:
    """A kubeconfig whose one cluster is ``http://127.0.0.1:<port>`` (a token user, no TLS)."""
    path = folder / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path
