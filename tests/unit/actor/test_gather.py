"""Joining many call futures into one (the mesh-wide ``call()``), with plain futures.

Aspects: the whole completes when every member has; a member flagged as fail-fast completes the
whole at once with that member's error while the others are still pending; without the flag an
error waits for the others.
"""

import pytest

from mesh_client._src.actor.actor_mesh import gather
from mesh_client._src.runtime import peers
from mesh_client._src.runtime.futures import Future


class Lost(Exception):
    pass


def decode(raw):
    status, data, _ = raw
    if status == peers.LOST:
        raise Lost(data)
    return data


def members(n):
    return [Future(decode) for _ in range(n)]


def test_the_whole_completes_when_every_member_has():
    futs = members(3)
    whole = gather(futs, list, fail_fast=peers.is_lost)
    for i, fut in enumerate(futs):
        assert not whole.done()
        fut.set_raw((peers.OK, i, None))
    assert whole.get(timeout=0) == [0, 1, 2]


def test_a_lost_member_fails_the_whole_while_the_others_are_pending():
    futs = members(3)
    whole = gather(futs, list, fail_fast=peers.is_lost)
    futs[0].set_raw((peers.OK, 0, None))
    futs[1].set_raw((peers.LOST, "proc 1 was killed by SIGKILL", None))
    assert whole.done() and not futs[2].done()
    with pytest.raises(Lost, match="proc 1 was killed by SIGKILL"):
        whole.get(timeout=0)


def test_without_fail_fast_an_error_waits_for_the_others():
    futs = members(2)
    whole = gather(futs, list)
    futs[0].set_raw((peers.LOST, "gone", None))
    assert not whole.done()
    futs[1].set_raw((peers.OK, 1, None))
    with pytest.raises(Lost):
        whole.get(timeout=0)
