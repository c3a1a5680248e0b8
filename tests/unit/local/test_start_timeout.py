"""``PROCMESH_START_TIMEOUT`` is read when procs start, not when mesh_client is imported (a
program setting it in os.environ after its imports was ignored), and a bad value says what to give."""

import pytest

from mesh_client._src.local import launcher


def test_the_timeout_is_read_when_procs_start(monkeypatch):
    monkeypatch.delenv("PROCMESH_START_TIMEOUT", raising=False)
    assert launcher.start_timeout() == launcher.DEFAULT_START_TIMEOUT
    monkeypatch.setenv("PROCMESH_START_TIMEOUT", "2.5")  # after the import
    assert launcher.start_timeout() == 2.5


def test_a_bad_timeout_says_what_to_give(monkeypatch):
    monkeypatch.setenv("PROCMESH_START_TIMEOUT", "two minutes")
    with pytest.raises(ValueError, match=r"PROCMESH_START_TIMEOUT='two minutes': give the seconds"):
        launcher.start_timeout()
