"""Ask a proc server about itself (pid, GPU, mesh and rank) without unpickling anything.

Used by the operator to publish the GPU each proc really sees, and by tests.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from mesh_client._src.runtime import ops, streams
from mesh_client._src.wire import envelopes, errors, protocol


def describe_proc(address: tuple[str, int], token: bytes, timeout: float = 5.0) -> dict[str, Any]:
    """Connect, authenticate, send DESCRIBE and return the proc's JSON description."""
    sock = socket.create_connection(address, timeout=timeout)
    stream = streams.SocketStream(sock)
    conn = protocol.Connection(protocol.Role.CLIENT, token)
    conn.start()
    try:
        sent = False
        while True:
            event = conn.next_event()
            out = conn.data_to_send()
            if out:
                stream.write([out])
            if event is protocol.NEED_DATA:
                conn.receive_data(stream.read(65536))
            elif isinstance(event, protocol.Authenticated) and not sent:
                stream.write(conn.send_message(envelopes.encode_request(1, (ops.DESCRIBE,), ())))
                sent = True
            elif isinstance(event, protocol.Message):
                # The reply header is a pickle of two ints; parse it without unpickling.
                return json.loads(bytes(event.segments[1]))
            elif isinstance(event, protocol.Closed):
                raise errors.ProtocolError(f"proc server at {address[0]}:{address[1]} closed: {event.reason}")
    finally:
        stream.close()
