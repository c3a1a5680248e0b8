"""``procmesh`` without a kubeconfig: one error line naming the files looked at and how to give
one (the client's own "Invalid kube-config file. No configuration found." named neither).
No cluster: the CLI fails before its first request."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.cli.support import env


def run(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in env().items() if k != "KUBECONFIG"} | environ
    return subprocess.run([sys.executable, "-m", "mesh_client.cli", *args], capture_output=True, text=True,
                          timeout=60, env=environment)


def test_no_kubeconfig_names_where_it_looked_and_the_fix(tmp_path):
    fix = "set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config"
    home = run("get", HOME=str(tmp_path))
    assert home.returncode == 1
    assert home.stderr == (f"error: no kubeconfig: looked at {tmp_path}/.kube/config (not found); {fix} "
                           f"(in a pod, the service account is used)\n")

    flag = run("get", "--kubeconfig", str(tmp_path / "nonexistent"), HOME=str(tmp_path))
    assert flag.returncode == 1 and flag.stderr.startswith(
        f"error: no kubeconfig: looked at {tmp_path}/nonexistent (not found); {fix}")

    two = f"{tmp_path}/a:{tmp_path}/b"
    listed = run("get", HOME=str(tmp_path), KUBECONFIG=two)
    assert listed.stderr.startswith(f"error: no kubeconfig: looked at {tmp_path}/a, {tmp_path}/b (not found)")

    (tmp_path / "broken").write_text("not: a kubeconfig\n")
    broken = run("get", "--kubeconfig", str(tmp_path / "broken"))
    assert broken.returncode == 1
    assert broken.stderr.startswith(f"error: cannot load Kubernetes credentials from {tmp_path}/broken: ")
