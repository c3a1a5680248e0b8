"""The 1 MiB echo over loopback TCP and AF_UNIX, with a receiver that reads as the reactor does.

Why unix links ask for a larger send buffer (runtime/streams.py ``UNIX_SEND_BUFFER``): an
AF_UNIX stream has only its sender's buffer, 208 KiB by default (net.core.wmem_default), so a
1 MiB frame waits several times for the receiver, where loopback TCP grows its own to 4 MiB. The
receiver waits in select, reads 64 KiB first, then the rest into a buffer of the frame's size,
as a channel does. TCP is the baseline of the same run; two rounds of 300 echoes per kind.

    python benchmarks/unix_sndbuf.py
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time

MIB = 1 << 20
ECHOES = 300
KINDS = (("tcp", 0), ("unix", 0), ("unix", 4 << 20), ("unix", 2 << 20))


def recv_frame(sock: socket.socket, chunk: memoryview) -> bytearray:
    select.select([sock], [], [])
    n = sock.recv_into(chunk)
    if n < 4:
        raise ConnectionError("closed")
    (size,) = struct.unpack_from("!I", chunk)
    buf = bytearray(size)
    view = memoryview(buf)
    got = n - 4
    view[:got] = chunk[4:n]
    while got < size:
        select.select([sock], [], [])
        got += sock.recv_into(view[got:])
    return buf


def serve(sock: socket.socket) -> None:
    chunk = memoryview(bytearray(65536))
    while True:
        try:
            frame = recv_frame(sock, chunk)
        except (ConnectionError, OSError):
            return
        sock.sendmsg([struct.pack("!I", len(frame)), frame])


def pair(kind: str, send_buffer: int) -> tuple[socket.socket, socket.socket]:
    if kind == "tcp":
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        listener.close()
        for s in (server, client):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    else:
        server, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if send_buffer:
        for s in (server, client):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    return server, client


def echo_p50(kind: str, send_buffer: int) -> tuple[float, int]:
    server, client = pair(kind, send_buffer)
    pid = os.fork()
    if pid == 0:
        client.close()
        serve(server)
        os._exit(0)
    server.close()
    payload = os.urandom(MIB)
    chunk = memoryview(bytearray(65536))
    lat = []
    for _ in range(ECHOES):
        t = time.perf_counter()
        client.sendmsg([struct.pack("!I", MIB), payload])
        recv_frame(client, chunk)
        lat.append(time.perf_counter() - t)
    granted = client.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    client.close()
    os.waitpid(pid, 0)
    return sorted(lat)[ECHOES // 2] * 1e6, granted


def main() -> None:
    with open("/proc/sys/net/core/wmem_max") as f:
        print(f"net.core.wmem_max {f.read().strip()}")
    for round_ in range(2):
        for kind, send_buffer in KINDS:
            p50, granted = echo_p50(kind, send_buffer)
            print(f"round {round_} {kind:4} SO_SNDBUF asked {send_buffer:>8} got {granted:>8}: 1 MiB echo p50 {p50:.0f} us")


if __name__ == "__main__":
    main()
