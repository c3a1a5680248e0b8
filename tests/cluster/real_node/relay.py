"""``python -m tests.cluster.real_node.relay NETNS PORT...``: host loopback ports into a namespace.

A real-node cluster runs inside its own network namespace (:mod:`tests.cluster.real_node.netns`);
tests and ``kubectl`` in the host namespace reach its API server (and the other components'
health ports) through this relay: it listens on ``127.0.0.1:PORT`` of the host and connects to
``127.0.0.1:PORT`` inside the namespace. Both ends are loopback addresses, so the relay adds no
path out of either namespace. The listening sockets are made before the process joins the
namespace (``setns``), every later socket inside it; one thread, so no thread is left behind
in the host namespace.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import sys

CLONE_NEWNET = 0x40000000


def join(netns_path: str) -> None:
    """Move this (single-threaded) process into the network namespace at ``netns_path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns_path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({netns_path}) failed")
    finally:
        os.close(fd)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _handler(port: int):  # type: ignore[no-untyped-def]
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            upstream_r, upstream_w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pump(client_r, upstream_w), _pump(upstream_r, client_w))

    return handle


async def _serve(listeners: dict[int, socket.socket]) -> None:
    servers = [await asyncio.start_server(_handler(port), sock=sock) for port, sock in listeners.items()]
    print(f"relaying 127.0.0.1:{sorted(listeners)} into the namespace", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str]) -> int:
    netns_path, *ports = argv
    listeners = {}
    for port in map(int, ports):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        sock.setblocking(False)
        listeners[port] = sock
    join(netns_path)
    asyncio.run(_serve(listeners))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
