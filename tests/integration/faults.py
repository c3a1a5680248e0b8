"""The ``faults`` fixture: unhandled supervision events of a test, collected instead of ending
pytest (the default ``unhandled_fault_hook`` ends the controller, as Monarch's does). Autouse, so
a test that kills a proc on purpose does not take the session down; tests that expect a fault
ask for the fixture and wait on it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

import mesh_client.actor
from mesh_client import MeshFailure


class Faults:
    """Failures that reached the client's hook, in arrival order."""

    def __init__(self) -> None:
        self.failures: list[MeshFailure] = []
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)

    def __call__(self, failure: MeshFailure) -> None:
        with self._changed:
            self.failures.append(failure)
            self._changed.notify_all()

    def named(self, name: str) -> list[MeshFailure]:
        """Failures of the actor meshes spawned under ``name`` (another test's leftovers, such as
        a mesh whose pods go with its namespace, may reach the hook while this test runs)."""
        with self._lock:
            return [f for f in self.failures if f.mesh_name.startswith(f"{name}-")]

    def wait(self, name: str, count: int = 1, timeout: float = 60.0) -> list[MeshFailure]:
        """The first ``count`` failures of meshes spawned as ``name``; fewer if they did not
        come within ``timeout``."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.named(name)) >= count, timeout)
            return self.named(name)


def _late(failure: MeshFailure) -> None:
    """A fault that arrived outside any test (e.g. a mesh left running when its pods went)."""
    print(f"procmesh tests: unhandled supervision event outside a test:\n{failure.report()}", file=sys.stderr)


@pytest.fixture(autouse=True, scope="session")
def _no_fault_ends_the_session() -> Iterator[None]:
    before = mesh_client.actor.unhandled_fault_hook
    mesh_client.actor.unhandled_fault_hook = _late
    try:
        yield
    finally:
        mesh_client.actor.unhandled_fault_hook = before


@pytest.fixture(autouse=True)
def faults(_no_fault_ends_the_session: None) -> Iterator[Faults]:
    collected = Faults()
    mesh_client.actor.unhandled_fault_hook = collected
    try:
        yield collected
    finally:
        mesh_client.actor.unhandled_fault_hook = _late
