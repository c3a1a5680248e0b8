"""A host mesh's stop bookkeeping (:mod:`mesh_client._src.actor.spawns`).

Aspects: a stop is done once its own meshes and the spawns in flight when it came have ended;
a spawn that began after it, or ended before it, is not waited for; a spawn in flight at a stop
gets that stop back (its mesh is the stop's to stop); a failed spawn releases the stop; the first
failure is the stop's; no spawn begins after shutdown, nor a stop (Monarch's second shutdown()
raises); a shutdown after a stop is one.
"""

from __future__ import annotations

import pytest

from mesh_client._src.actor import spawns

MESH = object()  # a mesh is only kept and handed back here


def test_a_stop_waits_for_the_spawns_in_flight_when_it_came():
    ledger = spawns.Spawns()
    before, waiting = ledger.begin(), ledger.begin()
    assert before is not None and waiting is not None
    assert ledger.end(before, MESH) == []
    taken = ledger.take(shutdown=False)
    assert taken is not None
    meshes, stopping = taken
    assert meshes == [MESH]
    after = ledger.begin()
    assert after is not None
    ledger.settle(stopping, spawns.OWN, None)
    assert not stopping.done.done()
    assert ledger.end(after, MESH) == []
    assert not stopping.done.done()
    assert ledger.end(waiting, MESH) == [stopping]
    ledger.settle(stopping, waiting, None)
    assert stopping.done.get(timeout=0) is None
    kept = ledger.take(shutdown=False)
    assert kept is not None and kept[0] == [MESH]  # the one spawned after the stop is kept


def test_a_failed_spawn_releases_the_stop_and_the_first_failure_is_the_stop_s():
    ledger = spawns.Spawns()
    failing, late = ledger.begin(), ledger.begin()
    assert failing is not None and late is not None
    taken = ledger.take(shutdown=True)
    assert taken is not None
    stopping = taken[1]
    assert ledger.begin() is None  # shut down: no more spawns
    ledger.settle(stopping, spawns.OWN, None)
    assert ledger.end(failing, None) == []
    assert ledger.end(late, MESH) == [stopping]
    ledger.settle(stopping, late, RuntimeError("could not delete"))
    with pytest.raises(RuntimeError, match="could not delete"):
        stopping.done.get(timeout=0)


def test_after_a_shutdown_no_stop_is_taken_but_a_shutdown_after_a_stop_is():
    ledger = spawns.Spawns()
    assert ledger.take(shutdown=False) is not None
    assert not ledger.shut_down
    assert ledger.take(shutdown=True) is not None
    assert ledger.shut_down
    assert ledger.take(shutdown=True) is None and ledger.take(shutdown=False) is None
