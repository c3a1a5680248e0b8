"""``--help`` on the CLI and every command, as the installed console script runs it."""

import subprocess
import sys

import pytest

from tests.integration.cli.support import env

COMMANDS = ["get", "describe", "logs", "top", "create", "delete", "wait", "grant"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help(command):
    args = [sys.executable, "-m", "mesh_client.cli", *([command] if command else []), "--help"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: procmesh {command or ''}".rstrip())
    assert "--namespace" in result.stdout and "--kubeconfig" in result.stdout
    if command is None:
        assert all(f"    {c} " in result.stdout for c in COMMANDS)
