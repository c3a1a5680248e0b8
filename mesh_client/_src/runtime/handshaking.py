"""The client's side of the handshake over a blocking stream: one driver for every client,
the long-lived channels of :func:`mesh_client._src.runtime.channel.connect` and one-shot
clients such as :func:`mesh_client._src.runtime.identifying.identify_proc`.

The protocol itself (what to send, what to accept) is :mod:`mesh_client._src.wire.protocol`;
this only moves its bytes until it says AUTHENTICATED. Reads block with the stream's timeout.
"""

from __future__ import annotations

from mesh_client._src.runtime import streams
from mesh_client._src.wire import errors, protocol

READ_BYTES = 4096  # handshake frames are under 100 bytes


def authenticate(stream: streams.Stream, conn: protocol.Connection, display: str) -> None:
    """Drive ``conn`` (a started client connection) until it is AUTHENTICATED.

    Raises AuthenticationError (a wrong token on either side, or the server closing),
    VersionMismatch (a proc server of another procmesh release, named with ``display``) or
    ProtocolError (the peer is not a procmesh proc server).
    """
    while conn.state is not protocol.State.AUTHENTICATED:
        conn.receive_data(stream.read(READ_BYTES))
        while True:
            try:
                event = conn.next_event()
            except errors.VersionMismatch as exc:
                raise errors.VersionMismatch(f"{display}: {exc}") from None
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
