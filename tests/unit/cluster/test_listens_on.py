"""``processes.listens_on``: a control-plane component counts as started only once it holds its
own listening socket; another process answering on a port that was picked free a moment before
(the race that left a test cluster without its scheduler) does not count."""

import os
import socket
import subprocess
import sys

from tests.cluster import processes


def test_the_listener_is_found_in_its_own_process_only():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert processes.listens_on(os.getpid(), port)
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert not processes.listens_on(other.pid, port)
        finally:
            other.kill()
            other.wait()
    assert not processes.listens_on(os.getpid(), port)


def test_a_connected_socket_is_not_a_listener():
    with socket.socket() as listener, socket.socket() as client:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client.connect(listener.getsockname())
        assert not processes.listens_on(os.getpid(), client.getsockname()[1])


def test_a_dual_stack_listener_counts():
    with socket.socket(socket.AF_INET6) as listener:
        listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(("::", 0))
        listener.listen()
        assert processes.listens_on(os.getpid(), listener.getsockname()[1])
