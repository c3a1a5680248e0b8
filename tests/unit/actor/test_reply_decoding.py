"""The caller's decoding of a reply (actor_mesh._decode) against messages.decode_reply.

Aspects: an OK reply decodes to the same value by the fast path as by decode_reply, for a
result of None, small values and a large out-of-band buffer; an ERROR or DEAD reply raises
what decode_reply raises; a call without arguments is sent as the one pickle that
serialization makes for it, and the proc's shortcut for it gives what unpickling gives.
"""

import pytest

from mesh_client._src.actor import actor_mesh, messages
from mesh_client._src.actor.errors import ActorError, SupervisionError
from mesh_client._src.runtime import peers
from mesh_client._src.wire import serialization

VALUES = [None, 0, "text", (1, [2, 3]), {"k": b"v"}, b"x" * (serialization.OUT_OF_BAND_BYTES + 1)]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_an_ok_reply_decodes_as_decode_reply_does(value):
    raw = (peers.OK, [bytes(s) for s in serialization.dumps(value)], None)
    assert actor_mesh._decode("Actor call m.f", "here", raw) == messages.decode_reply("Actor call m.f", "here", raw) == value


def test_an_empty_ok_reply_is_none():
    assert actor_mesh._decode("Actor call m.f", "here", (peers.OK, [], None)) is None


def test_error_and_dead_replies_raise_as_decode_reply_does():
    try:
        raise ValueError("boom")
    except ValueError as exc:
        failure = [bytes(s) for s in messages.encode_failure(exc)]
    with pytest.raises(ActorError, match="boom"):
        actor_mesh._decode("Actor call m.f", "here", (peers.ERROR, failure, None))
    with pytest.raises(SupervisionError, match="gone for good"):
        actor_mesh._decode("Actor call m.f", "here", (messages.DEAD, [b"gone for good"], None))


def test_a_call_without_arguments_is_the_one_known_pickle():
    assert serialization.dumps(((), {})) == [serialization.NO_ARGUMENTS]
    assert actor_mesh._NO_ARGUMENTS == (serialization.NO_ARGUMENTS,)
    assert serialization.loads([serialization.NO_ARGUMENTS]) == ((), {})
