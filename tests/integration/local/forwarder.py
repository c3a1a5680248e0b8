"""A TCP forwarder on 127.0.0.1 that passes one connection's bytes, unchanged, to a proc server:
what a listener at an address a client dials (a stale pod IP, a freed local port) could do
with the client's handshake (tests of wire/binding.py, local and on the cluster)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from mesh_client._src.wire import errors

TIMEOUT = 30.0  # every socket operation's bound, and the joins'


class Relay:
    """Accepts one connection on 127.0.0.1 and passes its bytes to and from ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.address = self.listener.getsockname()[:2]
        self.from_proc = bytearray()  # everything the proc sent back
        self.proc_closed = threading.Event()  # the proc ended the relayed connection
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client, _ = self.listener.accept()
        proc = socket.create_connection(self.target, timeout=TIMEOUT)
        client.settimeout(TIMEOUT)
        up = threading.Thread(target=self._pipe, args=(client, proc, None), daemon=True)
        up.start()
        self._pipe(proc, client, self.from_proc)
        self.proc_closed.set()
        up.join(TIMEOUT)
        client.close()
        proc.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if record is not None:
                record += data
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        self._thread.join(TIMEOUT)


def refused_through(target: tuple[str, int], connect: Callable[[tuple[str, int]], object]) -> tuple[str, bytes]:
    """``connect`` through a relay to ``target``: it must raise WrongProc, and the proc must end
    the relayed connection itself. The refusal's text and what the proc sent back."""
    relay = Relay(target)
    try:
        with pytest.raises(errors.WrongProc) as refused:
            connect(relay.address)
        assert relay.proc_closed.wait(TIMEOUT)  # the proc itself ended the relayed connection
    finally:
        relay.close()
    return str(refused.value), bytes(relay.from_proc)
