"""Mesh leases on the operator's clock: a renewal restarts the count, silence runs it out, a new
incarnation of the name starts afresh, and the spec's lease is parsed."""

from procmesh_operator import leases, specs

from .builders import mesh_body

KEY = ("ns", "m")


def test_silence_runs_the_lease_out_and_a_renewal_restarts_it():
    clock = leases.LeaseClock()
    assert clock.remaining(KEY, "u1", None, 30, now=100.0) == 30  # first sight: a full lease
    assert clock.remaining(KEY, "u1", None, 30, now=125.0) == 5
    assert clock.remaining(KEY, "u1", "t1", 30, now=129.0) == 30  # renewed
    assert clock.remaining(KEY, "u1", "t1", 30, now=160.0) == -1  # lapsed
    assert clock.remaining(KEY, "u2", "t1", 30, now=161.0) == 30  # another mesh of that name
    clock.forget(KEY)
    assert len(clock) == 0


def test_the_holders_clock_is_never_compared():
    clock = leases.LeaseClock()
    clock.remaining(KEY, "u", "1999-01-01T00:00:00Z", 10, now=0.0)  # a value far in the past
    assert clock.remaining(KEY, "u", "1999-01-01T00:00:00Z", 10, now=9.0) == 1


def test_spec_lease_parsed():
    body = mesh_body()
    assert specs.parse(body).lease_seconds is None
    body["spec"]["lease"] = {"durationSeconds": 20}
    body["metadata"]["annotations"] = {"procmesh.io/lease-renew-time": "t"}
    parsed = specs.parse(body)
    assert (parsed.lease_seconds, parsed.lease_renewal) == (20, "t")
