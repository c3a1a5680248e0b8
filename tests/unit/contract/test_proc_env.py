"""The ``PROCMESH_*`` environment, both directions.

Aspects: every :class:`contract.ProcEnv` renders and parses back to itself; a malformed variable
is refused with its name; the token is in no repr (of the env or of the server's settings); for every GPU mode, the env the operator's pod builder renders (the
pod-IP fieldRef resolved, the token file where the Secret is mounted) is what the proc server's
config parser accepts, with the values of the mesh's spec.
"""

from __future__ import annotations

import pytest

from mesh_client._src import contract
from mesh_client._src.server import config
from procmesh_operator import names, rendering, settings
from tests.unit.operator import builders

FULL = contract.ProcEnv(
    port=27001, listen_host="::1", token="t0k", token_file="/run/t", mesh="trainer", rank=5,
    coords={"hosts": 1, "gpus": 2}, memory_fraction=0.3, max_message_bytes=1 << 20, ready_fd=7,
    lifeline=True, sys_path=("/a", "/b c"), max_unauthenticated=8, handshake_timeout_seconds=2.5,
    sigterm_exit=143, incarnation="0f3c9a6e0b7d4b1f8a2e5c6d7e8f9a0b")


@pytest.mark.parametrize("env", [contract.ProcEnv(), FULL, contract.ProcEnv(port=0, coords={})])
def test_render_then_parse_is_identity(env):
    rendered = env.render()
    assert all(name.startswith("PROCMESH_") and isinstance(v, str) for name, v in rendered.items())
    assert contract.parse_proc_env(rendered) == env


@pytest.mark.parametrize("name, value, match", [
    (contract.PORT, "x", "is not an integer"),
    (contract.PORT, "70000", "is not a TCP port"),
    (contract.MEMORY_FRACTION, "0", r"must be in \(0, 1\]"),
    (contract.MEMORY_FRACTION, "half", "is not a number"),
    (contract.COORDS, "[1]", "not a JSON object of integers"),
    (contract.COORDS, '{"gpus": true}', "not a JSON object of integers"),
    (contract.COORDS, "{", "not valid JSON"),
    (contract.SYS_PATH, '"/a"', "not a JSON list of paths"),
    (contract.RANK, "one", "is not an integer"),
    (contract.MAX_UNAUTHENTICATED, "0", "must be at least 1"),
    (contract.HANDSHAKE_TIMEOUT_SECONDS, "-1", "must be positive"),
    (contract.MAX_MESSAGE_BYTES, "65535", "is below the least a proc may accept: give at least 65536"),
    (contract.MAX_MESSAGE_BYTES, "big", "is not an integer"),
])
def test_malformed_variables_are_named(name, value, match):
    with pytest.raises(contract.ContractError, match=f"{name}.*{match}"):
        contract.parse_proc_env({name: value})


GPU_MESHES = {
    contract.GPU_MODE_NONE: {"gpus": {"mode": "none"}},
    contract.GPU_MODE_PLUGIN: {"gpus": {"mode": "plugin", "memoryFraction": 0.25}},
    contract.GPU_MODE_PINNED: {"gpus": {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4}},
    contract.GPU_MODE_DRA: {"gpus": {"mode": "dra", "deviceClassName": "gpu.nvidia.com",
                                     "memoryFraction": 0.3}},
}


def test_every_gpu_mode_is_covered():
    assert set(GPU_MESHES) == set(contract.GPU_MODES)


@pytest.mark.parametrize("mode", contract.GPU_MODES)
def test_operator_pod_env_is_what_the_proc_server_reads(mode, tmp_path):
    mesh = builders.mesh("trainer", hosts=2, per_host=(("gpus", 2),), port=27000, **GPU_MESHES[mode])
    rank = 3
    placement = rendering.ProcPlacement(node="n1", device="1") if mode == contract.GPU_MODE_PINNED \
        else rendering.ProcPlacement()
    pod = rendering.render_pod(mesh, rank, placement, settings.Settings())
    (container,) = pod["spec"]["containers"]
    # What the kubelet does: resolve the pod-IP and pod-UID fieldRefs, mount the token Secret.
    (mount,) = container["volumeMounts"]
    (volume,) = pod["spec"]["volumes"]
    assert mount["name"] == volume["name"] == names.TOKEN_VOLUME
    assert volume["secret"]["items"] == [{"key": contract.TOKEN_KEY, "path": contract.TOKEN_KEY}]
    token_file = tmp_path / contract.TOKEN_KEY
    token_file.write_text("s3cret\n")
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            fields = {rendering.POD_IP_FIELD: "10.1.2.3", rendering.POD_UID_FIELD: "6f1c8e0a-2b44-4a55-9d1e-0c3f5b7a9e21"}
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            assert item["valueFrom"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": path}} and path in fields
            env[item["name"]] = fields[path]
        else:
            env[item["name"]] = item["value"]
    assert env[contract.TOKEN_FILE] == f"{mount['mountPath']}/{contract.TOKEN_KEY}"
    env[contract.TOKEN_FILE] = str(token_file)

    cfg = config.from_env(env)

    assert (cfg.host, cfg.port, cfg.token) == ("10.1.2.3", 27000, b"s3cret")
    assert (cfg.mesh, cfg.rank, cfg.coords) == ("trainer", rank, {"hosts": 1, "gpus": 1})
    assert cfg.coords == mesh.shape.coords(rank)
    fraction = None if mode == contract.GPU_MODE_NONE else mesh.gpus.memory_fraction
    assert cfg.memory_fraction == fraction
    assert (cfg.ready_fd, cfg.lifeline, cfg.sys_path) == (None, False, ())
    assert cfg.incarnation == "6f1c8e0a-2b44-4a55-9d1e-0c3f5b7a9e21"  # the pod's UID names its proc in handshakes


def test_a_malformed_incarnation_is_refused_naming_the_variable():
    with pytest.raises(config.ConfigError, match="PROCMESH_INCARNATION: a proc's incarnation id must be"):
        config.from_env({"PROCMESH_TOKEN": "t", contract.INCARNATION: "has space"})


def test_the_token_is_in_no_repr():
    assert "t0k" not in repr(FULL)
    cfg = config.from_env({"PROCMESH_TOKEN": "s3cr3t-t0ken"})
    assert cfg.token == b"s3cr3t-t0ken" and "s3cr3t-t0ken" not in repr(cfg)
