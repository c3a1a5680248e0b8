"""A stream() over a mesh that includes the calling actor (actor/own_calls.py): it raises only
once its own call is all that is left to arrive (the whole path: tests/integration/local/
test_own_calls.py).

Aspect: a reply that is done but not yet queued for the stream (a future's done callbacks run
after it is marked done, on the thread that completed it) is still to come, so the stream waits
for it rather than raising before it, which dropped that reply."""

import pytest

from mesh_client._src.actor import own_calls
from mesh_client._src.runtime.futures import Future


def test_a_reply_done_but_not_yet_queued_is_waited_for_before_the_refusal():
    other: Future[int] = Future(None)
    own = own_calls.OwnCall(Future(None), "Actor call m.f", holds_messages=True, task=None)
    other.set_result(1)  # done; its delivery to the stream's queue may still be under way
    own_calls.refuse_stream_wait([other, own], left=2)  # both still to be yielded: other comes
    with pytest.raises(RuntimeError, match=r"Actor call m\.f would wait for ever"):
        own_calls.refuse_stream_wait([other, own], left=1)  # other was yielded: only its own is left
