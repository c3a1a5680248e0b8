"""One port of a pod forwarded over one WebSocket (``v4.channel.k8s.io``, the kubelet's
port-forward protocol): a socketpair whose far end a relay thread joins to the WebSocket.

Why not ``kubernetes.stream.portforward``: its relay waits in ``select()`` on the WebSocket's
descriptor, but a TLS socket holds decrypted bytes that ``select()`` cannot see. When the API
server writes its ``101`` answer and the pod's first bytes in one TLS record (a proc server
speaks first, at once), the handshake reads the answer and leaves the pod's bytes inside the TLS
buffer; that relay then sleeps until more bytes come, which a proc server waiting for our reply
never sends, and its handshake deadline closes the connection 10 s later (a broken pipe in the
caller). This relay drains what TLS holds before every wait. It also does not swap the shared
``ApiClient.call_api`` for the length of the call, as that function does, under other threads
(the lease renewer, the output forwarder) using the same client.

Protocol: binary frames whose first byte is a channel (data 0, errors 1 for our single port);
each channel's first frame from the server is the port, 2 bytes little-endian; anything later on
the error channel is the kubelet saying why it gave up.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import threading
from typing import Any

from websocket import ABNF, WebSocketException

from mesh_client._src.runtime import exiting

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
# Bytes held for a side that is not reading before the relay stops reading the other:
# backpressure rather than unbounded memory.
HELD_BYTES = 4 << 20
READ_BYTES = 256 << 10
FLUSH_SECONDS = 5.0


class PortForward:
    """The local end (:attr:`socket`) of one forwarded port; :attr:`error` is what the kubelet
    said on the error channel, None if it said nothing."""

    def __init__(self, websocket: Any, port: int) -> None:
        self.port = port
        self.error: str | None = None
        self.socket, self._far = socket.socketpair()
        self._far.setblocking(False)
        self._ws = websocket
        self._thread = threading.Thread(target=self._relay, daemon=True, name=f"port-forward :{port}")
        exiting.track(self._thread, self._halt)  # out of the WebSocket's TLS before the interpreter ends
        self._thread.start()

    def close(self) -> None:
        """Close the local end; the relay sees it and closes the WebSocket."""
        self.socket.close()

    def _halt(self) -> None:
        """At exit: shut the WebSocket's socket down, which wakes the relay wherever it waits,
        a TLS write included; the local end, a channel's, then reads EOF as from any ended forward."""
        sock = getattr(self._ws, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _relay(self) -> None:
        relay = _Relay(self, self._ws, self._far)
        try:
            relay.run()
        except (OSError, WebSocketException, ValueError):
            pass  # the stream ended; the local end's EOF says so
        finally:
            relay.flush_local()
            self._far.close()
            try:
                self._ws.shutdown()
            except Exception:
                pass


def _buffered(sock: Any) -> bool:
    """Whether TLS holds decrypted bytes that ``select()`` will not report."""
    return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0


class _Relay:
    """The relay loop's state: bytes waiting for each side, and which channels said their port."""

    def __init__(self, forward: PortForward, websocket: Any, far: socket.socket) -> None:
        self.forward = forward
        self.ws = websocket
        self.far = far
        self.to_local = bytearray()
        self.to_remote = bytearray()
        self.announced = [False, False]
        self.message = bytearray()  # a fragmented message so far

    def run(self) -> None:
        ws_sock = self.ws.sock
        while True:
            readers: list[Any] = []
            if len(self.to_local) < HELD_BYTES:
                readers.append(ws_sock)
            if len(self.to_remote) < HELD_BYTES:
                readers.append(self.far)
            writers: list[Any] = [s for s, held in ((self.far, self.to_local), (ws_sock, self.to_remote)) if held]
            ready_now = ws_sock in readers and _buffered(ws_sock)
            readable, writable, _ = select.select(readers, writers, [], 0 if ready_now else None)
            if ready_now and ws_sock not in readable:
                readable.append(ws_sock)
            if ws_sock in readable and not self._from_remote():
                return
            if self.far in readable and not self._from_local():
                return
            if self.far in writable:
                self._drain(self.far, self.to_local)
            if ws_sock in writable:
                self._drain(ws_sock, self.to_remote)

    def _from_remote(self) -> bool:
        """One frame from the WebSocket; False when the forward is over. Control frames are
        answered here, queued behind our own frames, so that a pong never splits one of them."""
        frame = self.ws.recv_frame()
        opcode = frame.opcode
        if opcode == ABNF.OPCODE_CLOSE:
            return False
        if opcode == ABNF.OPCODE_PING:
            self.to_remote += ABNF.create_frame(frame.data, ABNF.OPCODE_PONG).format()
            return True
        if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_CONT):
            return True  # a pong; text is not part of the binary protocol we asked for
        self.message += frame.data
        if not frame.fin or not self.message:
            return True
        channel, body = self.message[0], bytes(self.message[1:])
        self.message = bytearray()
        if channel not in (DATA, ERROR):
            raise ValueError(f"frame on unexpected channel {channel}")
        if not self.announced[channel]:
            if len(body) != 2 or struct.unpack("<H", body)[0] != self.forward.port:
                raise ValueError(f"channel {channel} announced {body!r}, not port {self.forward.port}")
            self.announced[channel] = True
        elif channel == DATA:
            self.to_local += body
            self._drain(self.far, self.to_local)
        elif body:
            self.forward.error = (self.forward.error or "") + body.decode("utf-8", "replace")
            return False
        return True

    def _from_local(self) -> bool:
        """What the client wrote, framed for the WebSocket; False at the client's EOF."""
        try:
            data = self.far.recv(READ_BYTES)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.to_remote += ABNF.create_frame(bytes([DATA]) + data, ABNF.OPCODE_BINARY).format()
        return True

    def flush_local(self) -> None:
        """What the pod sent last reaches the client before its EOF (bounded: the client may be gone)."""
        if not self.to_local:
            return
        try:
            self.far.settimeout(FLUSH_SECONDS)
            self.far.sendall(self.to_local)
        except OSError:
            pass

    @staticmethod
    def _drain(sock: Any, held: bytearray) -> None:
        try:
            sent = sock.send(held)
        except (BlockingIOError, ssl.SSLWantWriteError):
            return
        del held[:sent]
