"""Real-node slots: a held slot is never handed out twice, a released one is reused (real flocks
in a temporary folder)."""

from __future__ import annotations

import os

from tests.cluster.real_node import slots


def test_a_held_slot_is_skipped_and_a_released_one_reused(tmp_path, monkeypatch):
    monkeypatch.setenv(slots.SLOTS_ENV, str(tmp_path))
    first, first_fd = slots.reserve()
    second, second_fd = slots.reserve()
    assert (first, second) == (0, 1)
    assert os.get_inheritable(first_fd)  # containerd inherits it and holds the slot
    os.close(first_fd)
    again, again_fd = slots.reserve()
    assert again == 0
    os.close(again_fd)
    os.close(second_fd)


def test_imports_are_recorded_per_slot(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    slots.root(3).mkdir(parents=True)
    assert slots.imported(3) == {}
    slots.record_import(3, "examples", "abc")
    slots.record_import(3, "pause", "def")
    assert slots.imported(3) == {"examples": "abc", "pause": "def"}
    assert slots.imported(4) == {}
