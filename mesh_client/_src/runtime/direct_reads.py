"""A thread that waits for replies reads them itself, for a short while, instead of the reactor.

Without this, a reply takes two hand-offs on the caller's side: the kernel wakes the reactor
thread, which parses the frame and completes the future, which wakes the waiting thread (each
wake-up is a futex and a GIL hand-over: 8-20 us per call, measured in
``benchmarks/results/actors.md``). A thread blocked in ``Future.get()`` has nothing else to do,
so it claims the reading of the channels its replies come on (:meth:`Channel.claim`: the
reactor's epoll stops reporting those sockets, from this thread, without waking the reactor),
polls them itself, handles every frame that arrives with the same code the reactor runs
(:meth:`Channel.read_ready`: other callers' replies on those channels are completed too, a
closed or reset connection fails its pending calls at once, as ever), and gives them back as
soon as its own result is in, or after :data:`WINDOW` seconds, whichever comes first. Then it
waits as before. Only waiting threads claim: a future nobody waits on is read by the reactor,
so replies never sit unread, and user code never runs while a channel is claimed.

Used by :mod:`.futures` (through the reader a peer attaches to the futures it makes).
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mesh_client._src.runtime import reactor

if TYPE_CHECKING:
    from mesh_client._src.runtime.channel import Channel

#: How long a waiting thread reads for itself before it leaves the reading to the reactor: a
#: call that takes longer gains nothing from saving a hand-off, and a channel closed by another
#: thread while claimed is noticed by its claimer within this time.
WINDOW = 0.002


def read_until(channels: Sequence[Channel], done: Callable[[], bool], window: float = WINDOW) -> None:
    """Read ``channels`` in this thread until ``done()`` or ``window`` seconds have passed; the
    channels that cannot be claimed (the reactor or another thread is reading them) are left
    to their reader."""
    claimed: dict[int, Channel] = {}
    try:
        for channel in channels:
            if channel.claim():
                claimed[channel.fileno()] = channel
        if not claimed or done():
            return
        poller = select.poll()
        for fd in claimed:
            poller.register(fd, select.POLLIN)
        open_channels = len(claimed)
        deadline = time.monotonic() + window
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for fd, _ in poller.poll(left * 1000):
                channel = claimed[fd]
                try:
                    channel.read_ready()
                except Exception as exc:  # a handler bug: reported as the reactor reports it
                    reactor.report(f"procmesh: I/O handler {channel!r} failed: {exc!r}")
                if channel.closed:
                    poller.unregister(fd)
                    open_channels -= 1
            if done() or not open_channels:
                return
    finally:
        for channel in claimed.values():
            channel.give_back()
