"""The proc server's pre-authentication settings from ``PROCMESH_*`` variables.

Aspects: defaults; both variables parsed; a cap below 1 or a non-positive timeout is refused
with a message naming the variable.
"""

import pytest

from mesh_client._src.server import config

BASE = {"PROCMESH_TOKEN": "secret"}


def test_defaults():
    cfg = config.from_env(BASE)
    assert cfg.max_unauthenticated == 256
    assert cfg.handshake_timeout == 10.0


def test_both_are_read():
    cfg = config.from_env({**BASE, "PROCMESH_MAX_UNAUTHENTICATED": "8", "PROCMESH_HANDSHAKE_TIMEOUT_SECONDS": "2.5"})
    assert (cfg.max_unauthenticated, cfg.handshake_timeout) == (8, 2.5)


@pytest.mark.parametrize(
    "name, value",
    [
        ("PROCMESH_MAX_UNAUTHENTICATED", "0"),
        ("PROCMESH_MAX_UNAUTHENTICATED", "many"),
        ("PROCMESH_HANDSHAKE_TIMEOUT_SECONDS", "0"),
        ("PROCMESH_HANDSHAKE_TIMEOUT_SECONDS", "soon"),
    ],
)
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(config.ConfigError, match=name):
        config.from_env({**BASE, name: value})
