"""Ask a proc server who it is (pid, GPU, mesh, rank, coordinates) without unpickling anything.

A one-shot client of the IDENTIFY request (answered by :mod:`mesh_client._src.server.dispatch`):
it shares the handshake driver (:mod:`.handshaking`) with :mod:`.channel`, and reads the reply's
JSON segment without trusting a pickle. ``procmesh top`` (:mod:`mesh_client._src.cli`) reads each
proc's GPU memory with it, tests a proc's pid and GPU; the operator never calls it (it stays off
the data plane).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import TypedDict

from mesh_client._src.runtime import handshaking, ops, streams
from mesh_client._src.wire import binding, envelopes, errors, protocol


class ProcIdentity(TypedDict):
    """Who a proc server is, as it was started (its mesh's rank and coordinates)."""

    mesh: str
    rank: int
    coords: dict[str, int]
    address: str  # host:port where it listens


class GpuMemory(TypedDict):
    """A proc's device memory in bytes (``procmesh top``): torch's allocated and reserved, the
    device's total, and the cap its memory fraction puts on it."""

    allocated: int
    reserved: int
    total: int
    cap: int


class IdentityReply(ProcIdentity):
    """The IDENTIFY reply: the identity plus what the proc sees now."""

    pid: int
    gpu: str | None  # the GPU it sees (a UUID, or the index its environment names), if any
    memory: GpuMemory | None  # device 0 as its torch allocator sees it; None without CUDA in use
    actors: int  # actors running in it
    # A random id drawn when the proc server started: the same proc answers with the same boot
    # after its connection broke, a new one (a restart, a new pod) with another (:mod:`.relinking`).
    # Absent from servers before it (read it with .get()).
    boot: str
    # The largest message it accepts (its PROCMESH_MAX_MESSAGE_BYTES): a client refuses a bigger
    # call itself instead of sending it to a proc that would close the connection. Absent from
    # servers before it (read it with .get()).
    max_message_bytes: int
    # Which run of which proc it is in handshakes (wire/binding.py): the pod's UID, or the id
    # its local launcher drew. Absent from servers before it (read it with .get()).
    incarnation: str


def identify_proc(
    address: tuple[str, int],
    token: bytes,
    timeout: float = 5.0,
    opener: Callable[[tuple[str, int], float], streams.SocketStream] | None = None,
    meant: binding.ProcId | None = None,
) -> IdentityReply:
    """Connect, authenticate, send IDENTIFY and return the proc's identity.

    ``opener`` makes the stream (a port-forward, say) instead of a TCP connection to ``address``.
    ``meant``: the proc the handshake names (another one refuses it); None: any proc of the mesh.
    """
    display = f"{address[0]}:{address[1]}"
    if opener is not None:
        stream = opener(address, timeout)
    else:
        stream = streams.SocketStream(socket.create_connection(address, timeout=timeout))
    conn = protocol.Connection(protocol.Role.CLIENT, token, meant=meant)
    conn.start()
    within = handshaking.bound(stream, timeout)
    deadline = time.monotonic() + within
    sock = stream.get_extra_info("socket")
    try:
        handshaking.authenticate(stream, conn, display, within)
        stream.write(conn.send_message(envelopes.encode_request(1, (ops.IDENTIFY,), ())))
        while True:
            event = conn.next_event()
            if event is protocol.NEED_DATA:
                left = deadline - time.monotonic()  # the reply too, within the same bound
                if left <= 0:
                    raise TimeoutError(f"{display} did not answer IDENTIFY within {within:g} s")
                if sock is not None:
                    sock.settimeout(left)
                conn.receive_data(stream.read(65536))
            elif isinstance(event, protocol.Message):
                # The reply envelope is a fixed struct and the identity is JSON: nothing is unpickled.
                reply: IdentityReply = json.loads(bytes(event.segments[1]))
                return reply
            elif isinstance(event, protocol.Closed):
                raise errors.ProtocolError(f"proc server at {display} closed: {event.reason}")
    finally:
        stream.close()
