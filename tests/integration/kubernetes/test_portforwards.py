"""The port-forward relay (``mesh_client._src.kubernetes.portforwards``) against a real TLS
WebSocket server on loopback that behaves as the API server in front of a kubelet can: its
``101`` answer, the two port frames and the pod's first bytes in a single TLS record.

That record is what made a proc's handshake through ``kubernetes.stream.portforward`` stall
until the proc server gave up (10 s, then a broken pipe in the caller): the library's relay
waits in ``select()`` while the pod's bytes sit decrypted inside the TLS socket.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mesh_client._src.kubernetes import forwarding
from mesh_client._src.runtime import exiting
from tests.cluster import pki
from tests.cluster.process_node import portforward as wire

PORT = 26600
BOUND = 20.0  # seconds a read may wait before the test fails (a stall, never a figure)


class _KubeletLike:
    """One TLS WebSocket port-forward at a time: answers the upgrade, then sends ``first`` (the
    pod speaking first) in the same write, then echoes data frames and records them."""

    def __init__(self, certs: pki.KeyPair, first: bytes, error: bytes | None = None) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certs.cert, certs.key)
        self.first, self.error = first, error
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.paths: list[str] = []
        self.headers: dict[str, str] = {}
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        raw, _ = self.listener.accept()
        with self.context.wrap_socket(raw, server_side=True) as conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            lines = request.decode().split("\r\n")
            self.paths.append(lines[0].split()[1])
            self.headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:] if ": " in line)}
            key = self.headers["sec-websocket-key"]
            answer = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Accept: {wire.accept_key(key)}\r\n"
                      f"Sec-WebSocket-Protocol: {wire.PROTOCOL}\r\n\r\n").encode()
            ports = wire.frame(b"\x00" + struct.pack("<H", PORT)) + wire.frame(b"\x01" + struct.pack("<H", PORT))
            later = wire.frame(b"\x01" + self.error) if self.error is not None else wire.frame(b"\x00" + self.first)
            conn.sendall(answer + ports + later)  # one TLS record
            try:
                while True:
                    opcode, data = wire.read_frame(conn)
                    if opcode == wire.CLOSE:
                        return
                    if opcode == wire.BINARY and data[:1] == b"\x00":
                        self.received.append(data[1:])
                        conn.sendall(wire.frame(b"\x00" + data[1:]))
            except (OSError, ConnectionError):
                return


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.KeyPair:
    folder: Path = tmp_path_factory.mktemp("pki")
    ca = pki.make_ca(folder)
    return pki.make_cert(ca, folder, "server", "127.0.0.1", sans=("IP:127.0.0.1",), server=True)


@pytest.fixture
def api_client(certs: pki.KeyPair) -> Iterator[Any]:
    configuration = client.Configuration()
    configuration.ssl_ca_cert = str(certs.cert.parent / "ca.crt")
    configuration.api_key = {"BearerToken": "secret-token"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    with client.ApiClient(configuration) as api:
        yield api


def _open(api_client: Any, server: _KubeletLike) -> Any:
    api_client.configuration.host = f"https://127.0.0.1:{server.port}"
    opener = forwarding.port_forward_opener(api_client, "ns", {("10.0.0.9", PORT): "policy-0"})
    stream = opener(("10.0.0.9", PORT), 5.0)
    stream.get_extra_info("socket").settimeout(BOUND)
    return stream


def test_the_pods_first_bytes_in_the_answers_tls_record_arrive_at_once(api_client: Any, certs: pki.KeyPair) -> None:
    server = _KubeletLike(certs, first=b"HELLO from the proc server")
    stream = _open(api_client, server)
    try:
        # A stall here (the old relay) times the read out after BOUND and fails the test.
        assert stream.read(4096) == b"HELLO from the proc server"
        stream.write([b"AUTH", b" reply"])
        assert stream.read(4096) == b"AUTH reply"
        assert server.received == [b"AUTH reply"]
        assert server.paths == [f"/api/v1/namespaces/ns/pods/policy-0/portforward?ports={PORT}"]
        assert server.headers["authorization"] == "Bearer secret-token"  # the client's own credentials
        assert server.headers["sec-websocket-protocol"] == wire.PROTOCOL
    finally:
        stream.close()


def test_what_the_kubelet_says_on_the_error_channel_reaches_the_caller(api_client: Any, certs: pki.KeyPair) -> None:
    said = b"error forwarding port 26600 to pod policy-0: connection refused"
    server = _KubeletLike(certs, first=b"", error=said)
    stream = _open(api_client, server)
    try:
        assert stream.read(4096) == b""  # the relay ends the local stream
        with pytest.raises(ConnectionError, match="the kubelet said: error forwarding port 26600"):
            stream.write([b"x" * (1 << 20)])
    finally:
        stream.close()


def test_an_api_server_that_never_answers_the_upgrade_fails_the_connect_at_its_bound(
    api_client: Any, certs: pki.KeyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An accepted connection whose upgrade is never answered must not hold the caller forever
    (the library's ``create_websocket`` has no timeout): the bound is the stream's handshake one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    listener = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []
    release = threading.Event()

    def silent() -> None:
        raw, _ = listener.accept()
        with context.wrap_socket(raw, server_side=True) as conn:
            requests.append(conn.recv(4096))  # the upgrade request, which gets no answer
            release.wait(BOUND)

    thread = threading.Thread(target=silent, daemon=True)
    thread.start()
    monkeypatch.setattr(forwarding.ForwardedStream, "handshake_timeout", 1.0)
    api_client.configuration.host = f"https://127.0.0.1:{listener.getsockname()[1]}"
    opener = forwarding.port_forward_opener(api_client, "ns", {("10.0.0.9", PORT): "policy-0"})
    try:
        with pytest.raises(ConnectionError, match="did not answer within 1 s"):
            opener(("10.0.0.9", PORT), 0.5)
        assert requests and requests[0].startswith(b"GET /api/v1/namespaces/ns/pods/policy-0/portforward")
    finally:
        release.set()
        thread.join(BOUND)
        listener.close()


def test_the_exit_ends_a_relay_and_its_local_end_reads_eof(api_client: Any, certs: pki.KeyPair) -> None:
    """The relay is registered to end before the interpreter does (runtime/exiting.py): its
    halt shuts the WebSocket down, the relay thread ends, the local end (a channel's) reads EOF."""
    server = _KubeletLike(certs, first=b"HELLO")
    stream = _open(api_client, server)
    try:
        assert stream.read(4096) == b"HELLO"
        forward = stream.forward
        halt = exiting.EXITS.halt_of(forward._thread)
        assert halt is not None
        halt()  # what the exit calls (end_all would also end this process's other threads)
        forward._thread.join(BOUND)
        assert not forward._thread.is_alive()
        assert stream.read(4096) == b""
    finally:
        stream.close()
