"""Process-node slots: two holders never get one slot, and a slot frees when its holder is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.process_node import slots


@pytest.fixture(autouse=True)
def slot_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROCMESH_NODE_SLOTS", str(tmp_path))
    return tmp_path


def test_a_held_slot_is_skipped() -> None:
    first, fd1 = slots.reserve()
    second, fd2 = slots.reserve()
    try:
        assert first != second
        assert slots.try_reserve(first) is None
    finally:
        os.close(fd1)
        os.close(fd2)


def test_a_closed_slot_is_free_again() -> None:
    index, fd = slots.reserve()
    os.close(fd)
    again = slots.try_reserve(index)
    assert again is not None
    os.close(again)


def test_a_child_that_inherits_the_slot_holds_it_after_the_parent_lets_go() -> None:
    index, fd = slots.reserve()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, pass_fds=(fd,))
    os.close(fd)
    try:
        assert slots.try_reserve(index) is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    freed = slots.try_reserve(index)
    assert freed is not None
    os.close(freed)
