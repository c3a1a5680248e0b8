"""The output forwarder's last read of every log when it stops (kubernetes/output.py), against a
loopback HTTP server that answers as the API server does for pods and their logs, through the
real Kubernetes client: one pod's read failing must not cost the pods after it their output."""

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from kubernetes import client

from mesh_client._src.kubernetes import api, output, transport


class PodsServer:
    """Pods ``logs`` (name -> text) of namespace ns; a followed log is answered with what it has
    and then kept open without more; a pod in ``throttled`` answers 429 to every request, one in
    ``silent`` nothing."""

    def __init__(self, logs: dict[str, str]) -> None:
        self.logs = logs
        self.throttled: set[str] = set()
        self.silent: set[str] = set()  # answers nothing (a black-holed API server)
        self.streaming = threading.Semaphore(0)  # released once per followed log answered
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                url = urlparse(self.path)
                parts = url.path.strip("/").split("/")  # api v1 namespaces ns pods NAME [log]
                name = parts[5]
                if name in server.silent:
                    server._release.wait(60)
                    self.close_connection = True
                elif name in server.throttled:
                    self._answer(429, "application/json", json.dumps(
                        {"kind": "Status", "code": 429, "message": "too many requests"}))
                elif parts[-1] != "log":
                    self._answer(200, "application/json", json.dumps(
                        {"metadata": {"name": name, "uid": f"uid-{name}"},
                         "status": {"containerStatuses": [{"name": "proc", "image": "procmesh", "imageID": "",
                                                             "ready": True, "restartCount": 0}]}}))
                elif "follow=true" in (url.query or ""):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    text = server.logs[name].encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(text), text))
                    self.wfile.flush()
                    server.streaming.release()
                    server._release.wait(60)  # no more lines; the forwarder shuts this stream down
                    self.close_connection = True
                else:
                    self._answer(200, "text/plain", server.logs[name])

            def _answer(self, status: int, kind: str, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _forwarder(served, pods, out):
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{served.port}"
    config.retries = transport.retries()
    kube = api.KubeApi(client.ApiClient(config), "ns")
    return kube, output.OutputForwarder(kube, "m", pods, out)


def test_a_pod_whose_last_read_fails_is_skipped_and_the_others_still_shown():
    """It stopped at the first pod whose read failed as unreachable (a 429 included): the later
    pods' last lines, printed before the controller stopped its mesh, were never shown."""
    served = PodsServer({"m-0": "a1\n", "m-1": "b1\n", "m-2": "c1\n"})
    out = io.StringIO()
    kube, forwarder = _forwarder(served, ["m-0", "m-1", "m-2"], out)
    try:
        forwarder.start()  # every pod's lines so far counted: none shown again
        for _ in range(3):  # every stream open (their lines so far skipped): what comes next is the last read's
            assert served.streaming.acquire(timeout=60)
        served.logs.update({"m-0": "a1\na2\n", "m-1": "b1\nb2\n", "m-2": "c1\nc2\n"})  # printed since
        served.throttled.add("m-1")
        forwarder.stop()
        assert out.getvalue().splitlines() == ["[m rank 0] a2", "[m rank 2] c2"]
    finally:
        kube.api_client.close()
        served.close()


def test_stop_ends_in_time_however_many_pods_the_api_server_leaves_unanswered(monkeypatch, capsys):
    """A request per pod, each waiting the request timeout, would hold a program's exit that many
    times over (the first unanswered one used to end the catch-up, and the pods after it), and so
    would a join of 2 s per following thread still waiting for its stream (16 here)."""
    monkeypatch.setattr(output, "CATCH_UP_SECONDS", 1.0)
    pods = [f"m-{i}" for i in range(16)]
    served = PodsServer({pod: "x\n" for pod in pods})
    kube, forwarder = _forwarder(served, pods, io.StringIO())
    kube.timeout = 60.0
    try:
        forwarder.start()
        served.silent.update(served.logs)
        stopping = threading.Thread(target=forwarder.stop, daemon=True)
        stopping.start()
        stopping.join(30)
        assert not stopping.is_alive(), "stop() still waiting after 30 s with a 1 s catch-up"
        assert "of ProcMesh ns/m's procs (from rank " in capsys.readouterr().err
    finally:
        kube.api_client.close()
        served.close()
