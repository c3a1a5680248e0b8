"""One future for the replies of many requests (runtime/gathering.py), as ``call()`` uses it.

Aspects: replies in any order give the values in member order; a failure completes the whole at
once while others are pending, and raises that member's error; a second outcome for a member is
ignored; an empty gather is done at once; over real peers, a proc whose connection drops in the
middle of a gather fails it at once while another proc has not answered.
"""

import threading

import pytest

from mesh_client._src.runtime import gathering, peers
from mesh_client._src.wire import envelopes
from tests.unit.runtime.test_peer import peer_with


class Failed(Exception):
    pass


def decode(index, raw):
    status, data, _ = raw
    if status != peers.OK:
        raise Failed(f"member {index}: {data}")
    return data


def failed(raw):
    return raw[0] != peers.OK


def test_replies_in_any_order_give_values_in_member_order():
    whole = gathering.Gather(4, decode, list, failed)
    slots = [whole.slot(i) for i in range(4)]
    for i in (2, 0, 3):
        slots[i].set_raw((peers.OK, f"v{i}", None))
        assert not whole.future.done()
    slots[1].set_raw((peers.OK, "v1", None))
    assert whole.future.get(timeout=0) == ["v0", "v1", "v2", "v3"]


def test_a_failure_completes_the_whole_at_once_with_that_members_error():
    whole = gathering.Gather(3, decode, list, failed)
    whole.slot(0).set_raw((peers.OK, "fine", None))
    whole.slot(2).set_raw((peers.LOST, "proc 2 was killed by SIGKILL", None))
    assert whole.future.done()
    with pytest.raises(Failed, match="member 2: proc 2 was killed by SIGKILL"):
        whole.future.get(timeout=0)
    whole.slot(1).set_raw((peers.OK, "late", None))  # a late reply changes nothing
    with pytest.raises(Failed, match="member 2"):
        whole.future.get(timeout=0)


def test_a_second_outcome_for_a_member_is_ignored():
    whole = gathering.Gather(2, decode, list, failed)
    slot = whole.slot(0)
    assert slot.set_raw((peers.OK, "first", None))
    assert not slot.set_raw((peers.LOST, "gone", None))
    assert slot.peek_raw() == (peers.OK, "first", None)
    whole.slot(1).set_raw((peers.OK, "second", None))
    assert whole.future.get(timeout=0) == ["first", "second"]


def test_an_empty_gather_is_done_at_once():
    assert gathering.Gather(0, decode, list, failed).future.get(timeout=0) == []


def test_a_dropped_connection_in_the_middle_fails_the_gather_at_once():
    hold = threading.Event()

    def answers(request, send):
        send(envelopes.encode_reply(request.call_id, envelopes.OK, [b"ok"]))

    def never_answers(request, send):
        hold.wait(30)  # the survivor is busy for longer than the test waits

    def dies(request, send):
        return False  # hangs up on the request: the proc is gone

    members = [peer_with(answers)[0], peer_with(never_answers)[0], peer_with(dies)[0]]
    whole = gathering.Gather(3, decode, list, failed)
    fields = envelopes.request_fields(("actor", "noop"))
    try:
        for i, peer in enumerate(members):
            peer.submit(whole.slot(i), 1, fields, [])
        with pytest.raises(Failed, match="member 2: memory closed the connection"):
            whole.future.get(timeout=10)
        assert whole.slot(1).peek_raw() is None  # it did not wait for the busy member
    finally:
        hold.set()
        for peer in members:
            peer.close()
