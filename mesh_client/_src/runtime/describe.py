"""Ask a proc server about itself (pid, GPU, mesh and rank) without unpickling anything.

Used by ``procmesh top`` (:mod:`mesh_client._src.cli`) for each proc's GPU memory, and by tests.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from mesh_client._src.runtime import handshaking, ops, streams
from mesh_client._src.wire import envelopes, errors, protocol


def describe_proc(
    address: tuple[str, int],
    token: bytes,
    timeout: float = 5.0,
    opener: Callable[[tuple[str, int], float], streams.SocketStream] | None = None,
) -> dict[str, Any]:
    """Connect, authenticate, send DESCRIBE and return the proc's JSON description.

    ``opener`` makes the stream (a port-forward, say) instead of a TCP connection to ``address``.
    """
    label = f"{address[0]}:{address[1]}"
    if opener is not None:
        stream = opener(address, timeout)
    else:
        stream = streams.SocketStream(socket.create_connection(address, timeout=timeout))
    conn = protocol.Connection(protocol.Role.CLIENT, token)
    conn.start()
    try:
        handshaking.authenticate(stream, conn, label)
        stream.write(conn.send_message(envelopes.encode_request(1, (ops.DESCRIBE,), ())))
        while True:
            event = conn.next_event()
            if event is protocol.NEED_DATA:
                conn.receive_data(stream.read(65536))
            elif isinstance(event, protocol.Message):
                # The reply header is a pickle of two ints; parse it without unpickling.
                return json.loads(bytes(event.segments[1]))
            elif isinstance(event, protocol.Closed):
                raise errors.ProtocolError(f"proc server at {label} closed: {event.reason}")
    finally:
        stream.close()
