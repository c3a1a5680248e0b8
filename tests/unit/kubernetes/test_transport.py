"""How the client's API requests wait and fail (kubernetes/transport.py), against real sockets on
loopback: a server that accepts and never answers, one that speaks plain HTTP to a TLS client,
and a port nobody listens on. No Kubernetes needed: what fails is the transport."""

import contextlib
import socket
import threading
import time

import pytest
import urllib3
from kubernetes import client

from mesh_client._src.kubernetes import api, logstreams, transport
from mesh_client._src.kubernetes.errors import ApiServerUnreachable, KubernetesMeshError
from tests.unit.kubernetes.loopback import kubeconfig_for


class Server:
    """A loopback listener: ``answer(conn)`` for each connection; counts them."""

    def __init__(self, answer):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = []
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)
            self._answer(conn)

    def close(self):
        self.listener.close()
        for conn in self.accepted:
            conn.close()


def kube_api(port, scheme="https"):
    config = client.Configuration()
    config.host = f"{scheme}://127.0.0.1:{port}"
    config.retries = transport.retries()  # as make_api_client sets it
    kube = api.KubeApi(client.ApiClient(config), "ns")
    kube.timeout = 0.5
    return kube


def test_a_server_that_never_answers_is_unreachable_after_one_try():
    silent = Server(lambda conn: None)
    kube = kube_api(silent.port)
    try:
        with pytest.raises(ApiServerUnreachable, match=rf"the API server https://127.0.0.1:{silent.port} did not "
                                                       r"answer a request to get procmeshes ns/x within 0.5 s"):
            kube.get_mesh("x")
        assert len(silent.accepted) == 1  # not sent again: each try would wait as long
        # A shorter wait where the caller has less time left (attach's deadline), never longer.
        with pytest.raises(ApiServerUnreachable, match="within 0.2 s"):
            kube.get_mesh("x", timeout=0.2)
        with pytest.raises(ApiServerUnreachable, match="within 0.5 s"):
            kube.get_mesh("x", timeout=30)
        # A list waits five times the timeout, and says so; -A names no namespace.
        kube.timeout = 0.1
        with pytest.raises(ApiServerUnreachable, match=r"to list procmeshes in all namespaces within 0.5 s: .*"
                                                       r"in seconds \(a list waits 5 times it\)$"):
            kube.list_meshes(all_namespaces=True)
    finally:
        kube.api_client.close()
        silent.close()


def test_a_tls_failure_is_no_unreachable_server_and_is_not_tried_again():
    def plain_http(conn):
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        conn.close()

    plain = Server(plain_http)
    kube = kube_api(plain.port)
    try:
        with pytest.raises(KubernetesMeshError) as info:
            kube.get_mesh("x")
        assert not isinstance(info.value, ApiServerUnreachable)  # attach's wait gives up at once
        assert str(info.value).startswith(f"TLS with the API server https://127.0.0.1:{plain.port} failed to get "
                                          f"procmeshes ns/x")
        assert "check the kubeconfig's server address and certificate-authority" in str(info.value)
        assert len(plain.accepted) == 1
    finally:
        kube.api_client.close()
        plain.close()


def test_a_port_nobody_listens_on_is_unreachable():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # held, never listening: refused, and no one else's meanwhile
    port = closed.getsockname()[1]
    kube = kube_api(port)
    try:
        with pytest.raises(ApiServerUnreachable, match=rf"cannot reach the API server https://127.0.0.1:{port} to "
                                                       r"get procmeshes ns/x: .*Connection refused"):
            kube.get_mesh("x")
    finally:
        kube.api_client.close()
        closed.close()


@pytest.mark.parametrize(("limit", "factor", "expected"), [
    (None, 1.0, None),
    ((None, 2.0), 1.0, (2.0, 2.0)),  # no limit of its own, a caller's deadline
    ((60.0, 2.0), transport.LIST_TIMEOUT_FACTOR, (2.0, 2.0)),
    ((60.0, 30.0), 1.0, (transport.CONNECT_SECONDS, 30.0)),
    (60.0, 1.0, (transport.CONNECT_SECONDS, 60.0)),
    (2.0, 1.0, (2.0, 2.0)),
    (60.0, transport.LIST_TIMEOUT_FACTOR, (transport.CONNECT_SECONDS, 60.0 * transport.LIST_TIMEOUT_FACTOR)),
    (60.0, 0.0, (transport.CONNECT_SECONDS, transport.FOLLOW_READ_SECONDS)),  # a followed log
    (None, transport.LIST_TIMEOUT_FACTOR, None),  # no limit: the client waits for ever
])
def test_the_request_timeout_of_each_kind_of_request(limit, factor, expected):
    limit, deadline = limit if isinstance(limit, tuple) else (limit, None)
    assert transport.request_timeout(limit, factor, deadline) == expected


def test_only_connects_and_answers_asking_for_it_are_tried_again():
    retry = transport.retries()
    assert (retry.connect, retry.read, retry.status, retry.other) == (
        transport.CONNECT_RETRIES, 0, transport.STATUS_RETRIES, 0)
    assert retry.respect_retry_after_header and set(retry.allowed_methods) == {"GET", "HEAD"}


@pytest.mark.parametrize(("header", "expected"), [("1", 1.0), ("3", transport.RETRY_AFTER_MAX_SECONDS),
                                                  ("21600", transport.RETRY_AFTER_MAX_SECONDS)])
def test_a_retry_after_is_waited_for_up_to_its_cap(header, expected):
    import urllib3

    response = urllib3.HTTPResponse(status=429, headers={"Retry-After": header})
    assert transport.retries().get_retry_after(response) == expected


def test_a_throttled_get_is_asked_again_when_the_server_says():
    """API Priority and Fairness answers 429 with Retry-After: a GET waits and asks again
    (the client's default did; the first policy of this module did not, and attach failed)."""
    # Connection: close, as the server closes it: a pooled connection it closed would race the retry
    answers = [b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nConnection: close\r\n"
               b"Content-Length: 0\r\n\r\n",
               b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
               b"Content-Length: 2\r\n\r\n{}"]

    def answer(conn):
        conn.recv(4096)
        conn.sendall(answers.pop(0) if answers else b"HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    throttled = Server(answer)
    kube = kube_api(throttled.port, scheme="http")
    try:
        assert kube.get_mesh("m") == {}
        assert answers == []
    finally:
        kube.api_client.close()
        throttled.close()


def test_a_wait_with_a_deadline_bounds_every_request_of_it():
    silent = Server(lambda conn: None)
    kube = kube_api(silent.port)
    kube.timeout = 30.0
    try:
        # a list waits five times the timeout, but not past what the caller has left
        with pytest.raises(ApiServerUnreachable, match="within 0.3 s"):
            kube.visible_pods("m", timeout=0.3)
    finally:
        kube.api_client.close()
        silent.close()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, transport.API_TIMEOUT_SECONDS),
        ({"PROCMESH_API_TIMEOUT": ""}, transport.API_TIMEOUT_SECONDS),
        ({"PROCMESH_API_TIMEOUT": " 2.5 "}, 2.5),
        ({"PROCMESH_API_TIMEOUT": "600"}, 600.0),
        ({"PROCMESH_API_TIMEOUT": "0"}, None),  # no limit, as kubectl by default
    ],
)
def test_the_request_timeout_comes_from_the_environment(environ, expected):
    assert transport.api_timeout_from(environ) == expected


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf", "3e9"])
def test_a_bad_request_timeout_says_what_to_give(raw):
    with pytest.raises(ValueError, match=f"PROCMESH_API_TIMEOUT={raw!r} is not a number of seconds up to 86400: give how"):
        transport.api_timeout_from({"PROCMESH_API_TIMEOUT": raw})


@pytest.mark.parametrize("follow", [False, True])
def test_every_kind_of_request_timeout_is_one_the_client_accepts(follow):
    """The generated client validates ``_request_timeout`` (numbers above 0): a followed log's
    request with no read timeout (None) was refused before it was sent, and the output
    forwarder, which takes any error as a dropped stream, reopened it for ever, showing nothing."""
    served = Server(lambda conn: (conn.recv(4096), conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n"), conn.close()))
    kube = kube_api(served.port, scheme="http")
    try:
        response = kube.pod_log("p-0", follow=follow)
        assert response.read() == b"hello\n"
    finally:
        kube.api_client.close()
        served.close()


def _quiet_log(conn, quiet, answer_late=False):
    """Answer a log request (at once, or with its first line ``quiet`` seconds later, as the
    kubelet answers a followed log with no lines yet), then stay quiet ``quiet`` seconds before
    the next line."""
    conn.recv(4096)
    if answer_late:
        time.sleep(quiet)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"6\r\nfirst\n\r\n")

    def rest():
        with contextlib.suppress(OSError):  # the test may have closed it (a plain read timed out)
            conn.sendall(b"7\r\nsecond\n\r\n0\r\n\r\n")
            conn.close()

    threading.Timer(quiet, rest).start()


@pytest.mark.parametrize("follow", [False, True])
def test_a_followed_log_may_be_quiet_longer_than_the_request_timeout(follow):
    served = Server(lambda conn: _quiet_log(conn, quiet=2.5))
    kube = kube_api(served.port, scheme="http")  # each read: 0.5 s
    try:
        response = kube.pod_log("p-0", follow=follow)
        if follow:
            assert list(logstreams.response_lines(response)) == ["first", "second"]
        else:  # a plain read is bounded throughout
            with pytest.raises(urllib3.exceptions.ReadTimeoutError):
                list(logstreams.response_lines(response))
        response.release_conn()
    finally:
        kube.api_client.close()
        served.close()


def test_a_followed_log_of_a_pod_with_no_lines_yet_is_answered_with_its_first_line():
    """The kubelet sends a followed log's headers with its first bytes: a request timeout on
    the answer would fail 'procmesh logs -f --tail 0' of every quiet proc."""
    served = Server(lambda conn: threading.Thread(target=_quiet_log, args=(conn, 1.5, True), daemon=True).start())
    kube = kube_api(served.port, scheme="http")  # each read: 0.5 s
    try:
        response = kube.pod_log("p-0", follow=True, tail=0)
        assert list(logstreams.response_lines(response)) == ["first", "second"]
        response.release_conn()
    finally:
        kube.api_client.close()
        served.close()


def test_the_clients_connections_are_kept_alive(tmp_path):
    """A followed log waits a week for its next bytes: TCP keepalive is what ends it when the
    API server's host goes away (no FIN, no RST) instead."""
    served = Server(lambda conn: (conn.recv(4096), conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n")))
    kube = api.KubeApi(api.make_api_client(str(kubeconfig_for(tmp_path, served.port))), "ns")
    try:
        response = kube.pod_log("p-0", follow=True)
        sock = response.connection.sock
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == transport.KEEPALIVE_IDLE_SECONDS
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == transport.KEEPALIVE_INTERVAL_SECONDS
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == transport.KEEPALIVE_PROBES
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0  # urllib3's own kept
        assert response.read() == b"hello\n"
    finally:
        kube.api_client.close()
        served.close()
