"""Running the ``procmesh`` CLI as a user would: a subprocess (``python -m mesh_client.cli``)
with a kubeconfig, the admin's or a service account's (a token user, written here)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import yaml

from tests.integration.operator.support import ROOT


def env() -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "operator"), environ.get("PYTHONPATH", "")])
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    return environ


def procmesh(kubeconfig: pathlib.Path | str, *args: str, input: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One CLI run to completion; the caller asserts on returncode, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "mesh_client.cli", "--kubeconfig", str(kubeconfig), *args],
                          input=input, capture_output=True, text=True, timeout=timeout, env=env(), cwd=str(ROOT))


def start(kubeconfig: pathlib.Path | str, *args: str) -> subprocess.Popen[str]:
    """A CLI run that keeps going (``logs -f``); the caller stops it."""
    return subprocess.Popen([sys.executable, "-m", "mesh_client.cli", "--kubeconfig", str(kubeconfig), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=str(ROOT))


def token_kubeconfig(path: pathlib.Path, api_client: Any, namespace: str) -> pathlib.Path:
    """A kubeconfig for the bearer-token user of ``api_client`` (a service account's), whose
    context's namespace is ``namespace``."""
    config = api_client.configuration
    token = config.api_key["authorization"].removeprefix("Bearer ")
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": config.host, "certificate-authority": config.ssl_ca_cert}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
    }))
    return path
