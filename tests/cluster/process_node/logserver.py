"""The node's kubelet endpoint, for ``kubectl logs``: HTTPS ``/containerLogs/<ns>/<pod>/<container>``,
and ``/portForward/<ns>/<pod>`` (:mod:`.portforward`).

The apiserver proxies ``pods/log`` to ``https://<InternalIP>:<daemonEndpoints port>``. This server
binds the node's loopback address, presents a serving certificate signed by the cluster CA and
only answers clients with a certificate from that CA (the apiserver's kubelet client
certificate). It serves the output files :mod:`.containers` writes, honouring ``previous``,
``tailLines``, ``limitBytes`` and ``follow`` (streams until the run ends). Started by :mod:`.agent`.
"""

from __future__ import annotations

import http.server
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from tests.cluster.process_node import portforward

#: ``find(namespace, pod, container, previous)``: the output file and whether that run still runs.
Finder = Callable[[str, str, str, bool], "tuple[Path, bool] | None"]


def _tail(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


class _Handler(http.server.BaseHTTPRequestHandler):
    server: LogServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "portForward" and self.server.pod_ip is not None:
            ports = [int(p) for p in urllib.parse.parse_qs(url.query).get("port", []) if p.isdigit()]
            portforward.serve(self, parts[1], parts[2], ports, self.server.pod_ip)
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self.send_error(404, "only /containerLogs/<namespace>/<pod>/<container> is served")
            return
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        previous = query.get("previous") == "true"
        found = self.server.find(parts[1], parts[2], parts[3], previous)
        if found is None:
            self.send_error(404, f"container {parts[3]!r} of pod {parts[1]}/{parts[2]} has no output here")
            return
        path, running = found
        data = path.read_bytes()
        tail = query.get("tailLines") or query.get("tail")
        if tail and tail != "all":
            data = _tail(data, int(tail))
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        if limit is not None:
            data = data[:limit]
        self.send_response(200)
        # HTTP/1.0 without a length: the body is streamed and ends when the connection closes.
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self._send(data)
        if query.get("follow") == "true" and running and limit is None:
            self._follow(path, parts, previous, path.stat().st_size)

    def _send(self, data: bytes) -> None:
        if data:
            self.wfile.write(data)
            self.wfile.flush()

    def _follow(self, path: Path, parts: list[str], previous: bool, offset: int) -> None:
        with open(path, "rb") as f:
            f.seek(offset)
            while True:
                chunk = f.read(65536)
                if chunk:
                    self._send(chunk)
                    continue
                found = self.server.find(parts[1], parts[2], parts[3], previous)
                if found is None or found[0] != path or not found[1]:
                    self._send(f.read())
                    return
                time.sleep(0.2)


class LogServer(http.server.ThreadingHTTPServer):
    """HTTPS on ``(host, 0)``; :attr:`port` is where it listens."""

    daemon_threads = True

    def __init__(self, host: str, cert: Path, key: Path, ca: Path, find: Finder,
                 pod_ip: Callable[[str, str], str | None] | None = None) -> None:
        super().__init__((host, 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        context.load_verify_locations(str(ca))
        context.verify_mode = ssl.CERT_REQUIRED
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.find = find
        self.pod_ip = pod_ip
        self.port = int(self.server_address[1])

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="logserver", daemon=True).start()
