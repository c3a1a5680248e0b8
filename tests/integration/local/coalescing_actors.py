"""Actors for the coalescing tests (importable by the proc servers)."""

import os
import time

from mesh_client import Actor, endpoint
from tests.integration.local.actors import wait_for_file

# Every wait in these actors is bounded: a test that would hang fails instead.
WAIT_SECONDS = 60.0


class Sequencer(Actor):
    """Answers with what it was given, counts what it saw, and waits for files to appear."""

    def __init__(self) -> None:
        self.seen: list = []

    @endpoint
    def index(self, i: int) -> int:
        self.seen.append(i)
        return i

    @endpoint
    def history(self) -> list:
        return self.seen

    @endpoint
    def note(self, path: str, value: int) -> None:
        """One-way: writes ``value`` to ``path``, for the test to see without a call."""
        with open(path + ".tmp", "w") as f:
            f.write(str(value))
        os.rename(path + ".tmp", path)

    @endpoint
    def wait_for(self, path: str) -> bool:
        """Blocks until ``path`` exists (True), or gives up after WAIT_SECONDS (False)."""
        return wait_for_file(path, WAIT_SECONDS)

    @endpoint
    def pause(self, seconds: float) -> None:
        time.sleep(seconds)

    @endpoint
    def pid(self) -> int:
        return os.getpid()
