"""A followed log of an API server that vanished from the network ends (kubernetes/transport.py):
no request timeout can bound a followed log (it may be quiet for hours), so TCP keepalive is
what notices a peer that stopped answering at all, as a host that went down or a partition does
(no FIN, no RST). The partition is real: an iptables rule drops, on loopback only, every segment
the server's port sends, after the log's first line arrived.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading

from mesh_client._src.kubernetes import api, logstreams, transport
from tests.unit.kubernetes.loopback import kubeconfig_for


class QuietLog:
    """A loopback HTTP server answering one followed log request with one line, then silent."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.conns.append(conn)
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"6\r\nfirst\n\r\n")

    def close(self) -> None:
        self.listener.close()
        for conn in self.conns:
            conn.close()


def _drop(port: int, action: str) -> None:
    subprocess.run(["iptables", action, "INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"],
                   check=True, capture_output=True, timeout=30)


def test_a_followed_log_of_an_api_server_gone_from_the_network_ends(tmp_path, monkeypatch):
    assert shutil.which("iptables"), "iptables is needed (scripts/setup installs it)"
    assert os.geteuid() == 0, "this test changes the firewall (loopback only): run the tests as root, as scripts/test does"
    monkeypatch.setattr(transport, "KEEPALIVE_IDLE_SECONDS", 1)
    monkeypatch.setattr(transport, "KEEPALIVE_INTERVAL_SECONDS", 1)
    monkeypatch.setattr(transport, "KEEPALIVE_PROBES", 2)
    served = QuietLog()
    kube = api.KubeApi(api.make_api_client(str(kubeconfig_for(tmp_path, served.port))), "ns")
    lines: list[str] = []
    ended: list[BaseException | None] = []
    first = threading.Event()

    def follow() -> None:
        try:
            for line in logstreams.response_lines(kube.pod_log("p-0", follow=True)):
                lines.append(line)
                first.set()
            ended.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            ended.append(exc)
        first.set()

    dropping = False
    try:
        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert first.wait(30) and lines == ["first"], (lines, ended)
        _drop(served.port, "-I")
        dropping = True
        reader.join(60)
        assert ended, "the followed log still waits on a server that stopped answering"
        assert ended[0] is not None and "timed out" in str(ended[0]).lower(), repr(ended[0])
    finally:
        if dropping:
            _drop(served.port, "-D")
        kube.api_client.close()
        served.close()

