"""Monarch names with no procmesh equivalent: importable, and saying at use what to do instead.

Aspects: ``debug_controller()`` and ``attach(addr)`` raise NotImplementedError naming the way on;
``config.prefix_python_logs_with_actor`` is ``options.prefix_logs_with_actor``.
"""

import pytest

from mesh_client import attach, config, debug_controller, options


def test_debug_controller_says_what_to_do():
    with pytest.raises(NotImplementedError, match=r"no remote debugger.*this_proc\(\)\.spawn"):
        debug_controller()


def test_attach_points_at_the_api_server_tunnel():
    with pytest.raises(NotImplementedError, match=r"via_api_server=True"):
        attach("tcp://gateway:1234")


def test_config_is_the_prefix_option(monkeypatch):
    monkeypatch.setattr(options, "prefix_logs_with_actor", True)
    assert config.prefix_python_logs_with_actor is True
    config.prefix_python_logs_with_actor = False
    assert options.prefix_logs_with_actor is False
