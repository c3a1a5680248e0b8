"""``Kueue.ready``: the test cluster's Kueue counts as ready only when its own process holds the
health port and answers there. The port is picked free a moment before Kueue starts, so another
worker's Kueue (or any server) may hold it and answer ``/readyz`` for it."""

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.cluster import processes
from tests.cluster.kueue import manager


class _Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_another_process_answering_on_the_health_port_is_not_this_kueue(tmp_path: Path) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Ready)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    kueue = manager.Kueue(tmp_path, server.server_address[1])
    # "Kueue" is a process that holds no socket: the one answering is this test's server.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        processes.write_pidfile(kueue.pidfile, other.pid)
        assert processes.read_pidfile(kueue.pidfile) == other.pid
        assert not kueue.ready()
        # The process that does hold the port and answers is ready.
        processes.write_pidfile(kueue.pidfile, os.getpid())
        assert kueue.ready()
    finally:
        other.kill()
        other.wait()
        server.shutdown()
        server.server_close()
