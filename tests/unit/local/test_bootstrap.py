"""BootstrapCommand: env merging, removal, inheritance; and proc server settings from env."""

import sys

import pytest

from mesh_client import BootstrapCommand, default_bootstrap_cmd
from mesh_client._src import contract
from mesh_client._src.server import config


def test_default_command_runs_our_proc_server_with_this_python():
    cmd = default_bootstrap_cmd()
    assert cmd.program == sys.executable
    assert cmd.argv()[1:] == ["-m", "mesh_client.proc_server"]


def test_with_env_merges_and_none_removes():
    cmd = default_bootstrap_cmd().with_env({"A": "1", "B": "2"}).with_env({"B": None, "C": "3"})
    env = cmd.environment({"B": "inherited", "KEEP": "yes"})
    assert env == {"A": "1", "C": "3", "KEEP": "yes"}


def test_without_inherit_env_only_its_own_variables():
    cmd = BootstrapCommand("/bin/true", env={"X": "1"}, inherit_env=False)
    assert cmd.environment({"HOME": "/root"}) == {"X": "1"}


def test_with_env_returns_a_copy():
    base = default_bootstrap_cmd()
    base.with_env({"CUDA_VISIBLE_DEVICES": "1"})
    assert "CUDA_VISIBLE_DEVICES" not in base.env


def test_server_config_reads_token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("abc\n")
    cfg = config.from_env({"PROCMESH_TOKEN_FILE": str(path), "PROCMESH_PORT": "0", "PROCMESH_COORDS": '{"gpus": 1}'})
    assert cfg.token == b"abc" and cfg.port == 0 and cfg.coords == {"gpus": 1}
    assert cfg.port != contract.PROC_PORT


@pytest.mark.parametrize(
    "env, match",
    [
        ({}, "no mesh token"),
        ({"PROCMESH_TOKEN": "t", "PROCMESH_PORT": "x"}, "PROCMESH_PORT='x' is not an integer"),
        ({"PROCMESH_TOKEN": "t", "PROCMESH_PORT": "70000"}, "not a TCP port"),
        ({"PROCMESH_TOKEN": "t", "PROCMESH_MEMORY_FRACTION": "1.5"}, r"must be in \(0, 1\]"),
        ({"PROCMESH_TOKEN_FILE": "/nonexistent/token"}, "cannot read the mesh token"),
    ],
)
def test_server_config_errors_name_the_variable(env, match):
    with pytest.raises(config.ConfigError, match=match):
        config.from_env(env)


def test_only_plain_proc_server_commands_are_forked():
    from mesh_client._src.local.zygote_client import eligible

    default = default_bootstrap_cmd()
    assert eligible(default.argv(), default.program, default.argv(), {"CUDA_VISIBLE_DEVICES": "1"}, True)
    assert not eligible(default.argv(), default.program, default.argv(), {"PYTHONPATH": "/x"}, True)
    assert not eligible(default.argv(), default.program, default.argv(), {}, False)
    assert not eligible(["/usr/bin/env", "python"], "/usr/bin/env", default.argv(), {}, True)
