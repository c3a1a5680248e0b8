"""SIGTERM's handler (kubernetes/terminating.py) in a controller process, against an HTTP server of
the test's own on loopback that records the requests: no Kubernetes needed, what is checked is
which ProcMesh deletions the handler sends.

Aspects: a forked child (a multiprocessing worker) inherits the handler, and its SIGTERM deletes
none of its parent's meshes; SIGTERM coming while the main thread holds the owned meshes' lock
(as it does in ``LeaseRenewer.start`` and ``stop``) still deletes them and ends the process.
"""

import signal
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mesh_client._src import contract

CONTROLLER = textwrap.dedent("""
    import signal, sys
    from kubernetes import client
    from mesh_client._src.kubernetes import api, lifetimes, terminating
    config = client.Configuration()
    config.host = {host!r}
    kube = api.KubeApi(client.ApiClient(config), "ns")
    terminating.install()  # as spawn_procs does, on the main thread
    lifetimes.LeaseRenewer(kube, "mine", 600).start()
""")

MESH = f"/apis/{contract.GROUP}/{contract.VERSION}/namespaces/ns/{contract.PLURAL}/mine"


class ApiServer:
    """Answers every PATCH and DELETE with an empty object and records (method, path)."""

    def __init__(self):
        self.requests = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                requests.append((self.command, self.path.split("?")[0]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_PATCH = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def deletes(self):
        return [path for method, path in self.requests if method == "DELETE"]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = ApiServer()
    yield s
    s.close()


def controller(server, then):
    return subprocess.Popen([sys.executable, "-c", CONTROLLER.format(host=server.host) + textwrap.dedent(then)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_forked_child_ended_by_sigterm_deletes_none_of_its_parents_meshes(server):
    """It deleted them: multiprocessing's terminate() of a worker deleted the mesh its parent
    went on using."""
    proc = controller(server, """
        import multiprocessing, time
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
        worker.start()
        worker.terminate()
        worker.join()
        print(worker.exitcode, flush=True)
        sys.stdin.read()  # the parent goes on until the test lets it end
    """)
    try:
        assert proc.stdout.readline() == f"{-signal.SIGTERM}\n"  # the worker died by SIGTERM
        assert server.deletes() == []  # its handler ran and waited for any deletion it sent
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stdout.read()
        assert server.deletes() == [MESH]  # the parent's exit deletes its mesh
    finally:
        proc.kill()
        proc.wait()


def test_a_forked_child_has_sigterm_at_its_default(server):
    """A Python handler inherited by a forked child loses a SIGTERM that comes before the
    child's interpreter is ready for signals: the child must not catch SIGTERM at all."""
    proc = controller(server, """
        import multiprocessing, time
        context = multiprocessing.get_context("fork")
        running = context.Event()
        worker = context.Process(target=lambda: (running.set(), time.sleep(600)))
        worker.start()
        assert running.wait(60)  # the child runs Python: its after-fork hooks have run
        with open(f"/proc/{worker.pid}/status") as status:
            caught = int(next(line for line in status if line.startswith("SigCgt:")).split()[1], 16)
        print(bool(caught & (1 << (signal.SIGTERM - 1))), flush=True)
        worker.kill()
        worker.join()
    """)
    try:
        assert proc.stdout.readline() == "False\n"
        assert proc.wait(timeout=60) == 0, proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_while_the_main_thread_holds_the_owned_meshes_lock_deletes_them_and_dies(server):
    """The handler runs on the main thread between two bytecodes, also inside the lock's block
    in LeaseRenewer.start or stop: a lock that is not reentrant hung the process there."""
    proc = controller(server, """
        with lifetimes._owned_lock:  # as in LeaseRenewer.start or stop when SIGTERM comes
            signal.raise_signal(signal.SIGTERM)
        print("survived SIGTERM", flush=True)
    """)
    try:
        assert proc.wait(timeout=60) == -signal.SIGTERM, proc.stdout.read()
        assert server.deletes() == [MESH]
    finally:
        proc.kill()
        proc.wait()
