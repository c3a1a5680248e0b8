"""A watch's answer becomes a supervision failure only when the owner did not ask for the end.

Aspects: DEAD (the actor failed) is reported to the owner; DEAD from a proc that was shutting
down at the owner's own stop() (the proc answers a watch that came after it began to close) is
not, as a lost connection at stop() is not; an end before the stop began (a crash the stop
came after) still is, however late the supervision thread gets to it; OK (stopped on purpose)
never is.
"""

import types

from mesh_client._src.actor import messages, supervision, watching
from mesh_client._src.runtime import futures, peers


def ended(monkeypatch, status, stopping, at=100.0):
    reports = []
    monkeypatch.setattr(supervision, "report", lambda owner, failure: reports.append((owner, failure)))
    group = types.SimpleNamespace(stopping=stopping, incarnations={0: 1})
    answer = futures.completed((status, [b"the process this actor was running on is shutting down"], None))
    watching._on_end(answer, group, 0, 0, "actor-1", "owner.actor", "owner-1", 1, at)
    return reports


def test_a_failed_actor_is_reported_to_its_owner(monkeypatch):
    reports = ended(monkeypatch, messages.DEAD, stopping={})
    assert [owner for owner, _ in reports] == ["owner-1"]


def test_a_proc_closing_at_the_owners_own_stop_is_not_a_failure(monkeypatch):
    assert ended(monkeypatch, messages.DEAD, stopping={0: 99.0}, at=100.0) == []


def test_an_end_before_the_owners_stop_began_is_still_a_failure(monkeypatch):
    reports = ended(monkeypatch, messages.DEAD, stopping={0: 101.0}, at=100.0)
    assert [owner for owner, _ in reports] == ["owner-1"]


def test_an_actor_stopped_on_purpose_is_not_a_failure(monkeypatch):
    assert ended(monkeypatch, peers.OK, stopping={}) == []
