"""The client's side of the handshake over a blocking stream: one driver for every client,
the long-lived channels of :func:`mesh_client._src.runtime.channel.connect` and one-shot
clients such as :func:`mesh_client._src.runtime.identifying.identify_proc`.

The protocol itself (what to send, what to accept) is :mod:`mesh_client._src.wire.protocol`;
this only moves its bytes until it says AUTHENTICATED. The whole handshake is bounded
(``within``), not each read: a peer that sends a byte just before each read would time out
(a squatted address, a hostile or broken endpoint) would otherwise hold the caller for as
many reads as its handshake frames have bytes, hours for a timeout of seconds.
"""

from __future__ import annotations

import socket
import time

from mesh_client._src.runtime import streams
from mesh_client._src.wire import errors, protocol

READ_BYTES = 4096  # handshake frames are under 100 bytes


def bound(stream: streams.Stream, timeout: float) -> float:
    """The seconds a handshake over ``stream`` may take: ``timeout``, or more where the stream
    asks for it (a port-forward's relay: the API server and kubelet open it first)."""
    return max(timeout, float(getattr(stream, "handshake_timeout", timeout)))


def authenticate(stream: streams.Stream, conn: protocol.Connection, display: str, within: float | None = None) -> None:
    """Drive ``conn`` (a started client connection) until it is AUTHENTICATED.

    ``within``: seconds the whole handshake may take, where the stream has a socket (its
    timeout is restored after); past them, TimeoutError naming ``display``.

    Raises AuthenticationError (a wrong token on either side, or the server closing) or
    VersionMismatch (a proc server of another procmesh release), both naming ``display``, or
    ProtocolError (the peer is not a procmesh proc server).
    """
    sock: socket.socket | None = stream.get_extra_info("socket") if within is not None else None
    if sock is None:
        _drive(stream, conn, display, None, None)
        return
    assert within is not None
    before = sock.gettimeout()
    try:
        _drive(stream, conn, display, sock, time.monotonic() + within)
    except TimeoutError:
        raise TimeoutError(
            f"the handshake with {display} did not finish within {within:g} s: the peer sent its part too "
            "slowly or not at all (not a procmesh proc server, or an overloaded one)"
        ) from None
    finally:
        sock.settimeout(before)


def _drive(stream: streams.Stream, conn: protocol.Connection, display: str,
           sock: socket.socket | None, deadline: float | None) -> None:
    while conn.state is not protocol.State.AUTHENTICATED:
        if sock is not None and deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        conn.receive_data(stream.read(READ_BYTES))
        while True:
            try:
                event = conn.next_event()
            except (errors.ProtocolError, errors.AuthenticationError) as exc:  # say which proc (of many)
                raise type(exc)(f"{display}: {exc}") from None
            out = conn.data_to_send()
            if out:
                stream.write([out])
            if event is protocol.NEED_DATA or isinstance(event, protocol.Authenticated):
                break
            if isinstance(event, protocol.Closed):
                raise errors.AuthenticationError(
                    f"{display} closed the connection during the handshake"
                    + (f": {event.reason}" if event.reason else "")
                )
