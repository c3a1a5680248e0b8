"""A TCP relay in front of the test cluster's API server, to make it stop answering or stop
listening (with real sockets; the API server itself stays up for the other tests)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Relay:
    """A TCP relay on loopback to the real API server, which can stop passing bytes on (a hung or
    black-holed server: connections are accepted, nothing comes back) or stop listening."""

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        self.target = target
        self.holding = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", port))  # SO_REUSEADDR: a port again after close
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False
        self._sockets: list[socket.socket] = []
        self.accepted = 0  # connections accepted so far (a client has tried)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            try:
                far = socket.create_connection(self.target, timeout=10)
                far.settimeout(None)
            except OSError:
                near.close()  # as a server that went away: the client sees the connection end
                continue
            with self._lock:
                if self._closed:  # accepted as close() went by: not relayed
                    near.close()
                    far.close()
                    continue
                self._sockets += [near, far]
            for src, dst in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not self.holding.is_set():  # held: swallowed, as a server that never answers
                    dst.sendall(data)
            if not self.holding.is_set():
                dst.shutdown(socket.SHUT_WR)  # the end of one side's stream, passed on

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # stops listening (close alone leaves accept() holding it)
        self.listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def ended(fn: Callable[[], object], seconds: float = 120) -> BaseException | None:
    """What ``fn()`` raised, from a thread given ``seconds`` (the call must not hang)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s: the call hangs on an API server that does not answer"
    return outcome[0]


def through(relay: Relay, cluster: Any, folder: Path) -> Path:
    """A copy of the cluster's admin kubeconfig whose server is the relay."""
    config = json.loads(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path = folder / f"kubeconfig-{relay.port}"
    path.write_text(json.dumps(config))
    return path
