"""Every wire test runs twice: on the per-message work in C (``_frames.c``, where built) and on
its Python twins; both must behave alike (tests/unit/frames_paths.py)."""

import pytest

from tests.unit.frames_paths import frames_path  # noqa: F401  (the fixture, used below)


@pytest.fixture(autouse=True)
def both_frames_paths(frames_path):  # noqa: F811
    return frames_path
