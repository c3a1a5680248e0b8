"""A proc's connection broke: is the proc alive behind a broken link, or gone?

A TCP connection can drop while the proc server at its other end runs on (a reset by a
middlebox, a port-forward that ended, a socket shut down underneath): reporting that proc dead
would end a controller whose actors are fine (the default supervision hook exits). Monarch's
channels reconnect and redeliver over such breaks. Here a :class:`~.peers.Peer` learns who its
proc is once per connection (IDENTIFY: mesh, rank, pid and ``boot``, a random id the proc
server drew when it started); when the link breaks it asks again, over a fresh connection,
within :data:`BOUND_SECONDS`. The same ``boot`` is the same process, alive: the peer gets a
successor connected to it and nothing is reported dead. Refused, silent, another ``boot`` (a
restart, a new pod), or a proc whose identity was never learnt: gone, as before.

What never happens is a silent resend: a call in flight at the break may or may not have run,
so it fails, with :func:`broken_link_text`; a call made after the break and before the new
connection was not sent (its reason starts with :data:`NOT_SENT`). Used by :mod:`.peers`; the
actor layer (:mod:`mesh_client._src.actor.watching`, ``messages``, ``trees``) asks
``Peer.relinked()`` before it reports a proc failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mesh_client._src.runtime import identifying, streams
from mesh_client._src.wire import binding

#: How long asking a proc who it is may take after its link broke (connect, handshake, reply).
BOUND_SECONDS = 2.0
#: The longest a caller waits for the verdict (the probe, then the successor's connection).
WAIT_SECONDS = 15.0
#: The start of the reason of a call made on a broken link before it was replaced: not sent.
NOT_SENT = "not sent: "


class Verdict:
    """The outcome of one broken link: the peer that reaches the same proc again, or None."""

    def __init__(self) -> None:
        self._settled = threading.Event()
        self.successor: Any = None  # a Peer; Any because peers imports this module
        self.why = ""  # why the proc counts as gone (for logs and messages)

    def settle(self, successor: Any, why: str = "") -> None:
        self.successor = successor
        self.why = why
        self._settled.set()

    def wait(self, since: float) -> Any:
        """The successor once settled, waiting up to :data:`WAIT_SECONDS` after ``since``
        (time.monotonic()); None if the proc is gone or the verdict is late."""
        self._settled.wait(max(0.0, since + WAIT_SECONDS - time.monotonic()))
        return self.successor if self._settled.is_set() else None

    @property
    def settled(self) -> bool:
        return self._settled.is_set()


def same_proc(before: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether two IDENTIFY answers come from one process. ``boot`` decides where both have it;
    servers from before it are compared by mesh, rank, listening address and pid."""
    if before.get("boot") or now.get("boot"):
        return bool(before.get("boot")) and before.get("boot") == now.get("boot")
    keys = ("mesh", "rank", "address", "pid")
    return all(before.get(k) is not None and before.get(k) == now.get(k) for k in keys)


def ask_again(address: tuple[str, int], token: bytes, before: Mapping[str, Any] | None,
              opener: Callable[[tuple[str, int], float], streams.SocketStream] | None,
              meant: binding.ProcId | None = None) -> tuple[bool, str]:
    """(alive, why not): ask the proc at ``address`` who it is now, within :data:`BOUND_SECONDS`,
    in a handshake meant for ``meant`` (another proc there refuses it)."""
    if before is None:
        return False, "this client had not learnt who the proc was before its connection broke"
    try:
        now = identifying.identify_proc(address, token, timeout=BOUND_SECONDS,
                                        opener=_bounded(opener) if opener is not None else None, meant=meant)
    except Exception as exc:  # refused, timed out, closed, refused our token: not the proc we knew
        return False, f"it does not answer ({type(exc).__name__}: {exc})"
    if same_proc(before, now):
        return True, ""
    return False, f"another process answers there now (pid {now.get('pid')})"


def _bounded(opener: Callable[[tuple[str, int], float], streams.SocketStream]
             ) -> Callable[[tuple[str, int], float], streams.SocketStream]:
    """``opener`` whose stream's reads (the handshake, the reply) are bounded by its timeout: a
    port-forward's stream has no bound of its own."""
    def open_(address: tuple[str, int], timeout: float) -> streams.SocketStream:
        stream = opener(address, timeout)
        stream.get_extra_info("socket").settimeout(timeout)
        return stream

    return open_


def broken_link_text(display: str, reason: str) -> str:
    """What a call failed by a broken link says when its proc is alive."""
    if reason.startswith(NOT_SENT):
        what = "it was not sent (it was made after the connection broke), so it did not run: call it again"
        reason = reason[len(NOT_SENT):]
    else:
        what = ("this call was in flight, so it may or may not have run there (a call is never sent twice): "
                "call it again if running it twice is safe")
    return (f"the connection to proc {display} broke ({reason}), {ALIVE}: the same process "
            f"answered again and this client reconnected to it, its actors and their state are kept; {what}")


#: What :func:`broken_link_text` says of the proc, which a forwarder's report is recognised by.
ALIVE = "but the proc is alive"


def says_alive(text: str) -> bool:
    """Whether a lost call's message (a forwarder's, from the tree) is a broken link's."""
    return ALIVE in text
