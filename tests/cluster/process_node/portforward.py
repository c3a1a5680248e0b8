"""The kubelet's port-forward over WebSocket, for ``kubectl port-forward`` and clients that reach
pods through the API server (``pods/portforward``).

The API server passes the client's WebSocket upgrade on to the node's kubelet endpoint
(:mod:`.logserver`) as ``GET /portForward/<namespace>/<pod>?port=N``. Protocol
``v4.channel.k8s.io``: binary frames whose first byte is a channel; port i uses channel 2i for
data and 2i+1 for errors; each channel's first server frame is the port, 2 bytes little-endian.
The pod's port is reached at its pod IP, on loopback.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455
PROTOCOL = "v4.channel.k8s.io"
BINARY, CLOSE, PING, PONG = 0x2, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(payload: bytes, opcode: int = BINARY) -> bytes:
    """A server frame (unmasked, final)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def _exact(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def read_frame(sock: Any) -> tuple[int, bytes]:
    """One client frame (masked), unmasked; fragments are not used by Kubernetes clients."""
    b0, b1 = _exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", _exact(sock, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _exact(sock, 8))
    mask = _exact(sock, 4) if b1 & 0x80 else b"\0\0\0\0"
    data = bytearray(_exact(sock, n))
    for i in range(n):
        data[i] ^= mask[i % 4]
    return b0 & 0x0F, bytes(data)


def serve(handler: Any, namespace: str, pod: str, ports: list[int], pod_ip: Callable[[str, str], str | None]) -> None:
    """Answer the upgrade on ``handler`` (an http.server handler) and relay until either side ends."""
    offered = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    ip = pod_ip(namespace, pod)
    if ip is None or PROTOCOL not in offered or not ports:
        handler.send_error(400, f"cannot forward to {namespace}/{pod} (ports {ports}, protocols {offered})")
        return
    targets = []
    try:
        for port in ports:
            targets.append(socket.create_connection((ip, port), timeout=5))
    except OSError as exc:
        for t in targets:
            t.close()
        handler.send_error(502, f"cannot connect to {namespace}/{pod} at {ip}: {exc}")
        return
    handler.protocol_version = "HTTP/1.1"  # a WebSocket answer must not say HTTP/1.0
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept_key(handler.headers["Sec-WebSocket-Key"]))
    handler.send_header("Sec-WebSocket-Protocol", PROTOCOL)
    handler.end_headers()
    conn = handler.connection
    send_lock = threading.Lock()

    def send(payload: bytes, opcode: int = BINARY) -> None:
        with send_lock:
            conn.sendall(frame(payload, opcode))

    for i, port in enumerate(ports):
        send(bytes([2 * i]) + struct.pack("<H", port))
        send(bytes([2 * i + 1]) + struct.pack("<H", port))

    def pump(i: int, target: socket.socket) -> None:
        target.settimeout(None)
        try:
            while True:
                data = target.recv(65536)
                if not data:
                    break
                send(bytes([2 * i]) + data)
        except OSError:
            pass
        try:
            send(struct.pack("!H", 1000), CLOSE)
        except OSError:
            pass

    for i, target in enumerate(targets):
        threading.Thread(target=pump, args=(i, target), daemon=True).start()
    try:
        while True:
            opcode, data = read_frame(conn)
            if opcode == CLOSE:
                break
            if opcode == PING:
                send(data, PONG)
            elif opcode == BINARY and data:
                channel = data[0]
                if channel % 2 == 0 and channel // 2 < len(targets):
                    targets[channel // 2].sendall(data[1:])
    except (OSError, ConnectionError):
        pass
    finally:
        for target in targets:
            target.close()
