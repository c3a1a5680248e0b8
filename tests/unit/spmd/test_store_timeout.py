"""The SPMD rendezvous store's bound (:mod:`mesh_client._src.spmd.rendezvous`): where it comes
from, what 0 means, what is refused, and that it only ever shortens torch's timeout."""

from datetime import timedelta

import pytest

from mesh_client._src.spmd import rendezvous


def test_given_then_environment_then_default():
    assert rendezvous.store_timeout(None, {}) == rendezvous.DEFAULT_STORE_TIMEOUT_SECONDS
    assert rendezvous.store_timeout(None, {rendezvous.STORE_TIMEOUT_ENV: "42"}) == 42
    assert rendezvous.store_timeout(7, {rendezvous.STORE_TIMEOUT_ENV: "42"}) == 7


def test_zero_keeps_torchs_own_timeout():
    assert rendezvous.store_timeout(None, {rendezvous.STORE_TIMEOUT_ENV: "0"}) is None
    assert rendezvous.capped(timedelta(minutes=30), None) == timedelta(minutes=30)


def test_the_bound_only_shortens():
    assert rendezvous.capped(timedelta(minutes=30), 5) == timedelta(seconds=5)
    assert rendezvous.capped(timedelta(seconds=2), 5) == timedelta(seconds=2)  # the script's own, shorter


def test_nonsense_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match="PROCMESH_SPMD_STORE_TIMEOUT_SECONDS='soon' is not a number"):
        rendezvous.store_timeout(None, {rendezvous.STORE_TIMEOUT_ENV: "soon"})
    with pytest.raises(ValueError, match="give a positive number of seconds"):
        rendezvous.store_timeout(-1, {})
