"""The master port SPMDActor offers is outside the kernel's ephemeral range, where no outgoing
connection can take it before rank 0's TCPStore binds it, and it is free when offered."""

import socket

from mesh_client._src.spmd import actor


def test_the_master_port_is_below_the_ephemeral_range_and_free():
    low = actor._ephemeral_low()
    for _ in range(20):
        port = actor._free_port("127.0.0.1")
        if low is not None and low > actor.MASTER_PORT_FLOOR:
            assert actor.MASTER_PORT_FLOOR <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # still free: it was only probed
