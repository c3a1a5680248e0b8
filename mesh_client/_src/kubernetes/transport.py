"""How the client's requests to the API server wait, are tried again, and fail.

The Kubernetes client waits for ever by default (as kubectl) and tries a request up to four
times: a hung or black-holed API server kept ``attach``, the lease renewer and the CLI waiting
without end, and its urllib3 errors escaped as tracebacks (one ended the lease renewer's thread).
Here each request waits :data:`CONNECT_SECONDS` at most to connect and then the request timeout
(``PROCMESH_API_TIMEOUT``) for its answer, a connect that fails is tried twice more (an API server
restarting), a request sent and not answered is not (each try would wait as long again), and
what went wrong is raised as :class:`ApiServerUnreachable` (worth trying again later) or, for a
TLS or name failure no retry fixes, as :class:`KubernetesMeshError` saying what to check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mesh_client._src.kubernetes.errors import ApiServerUnreachable, KubernetesMeshError

T = TypeVar("T")

#: How long a request waits for its answer (seconds) unless ``PROCMESH_API_TIMEOUT`` says
#: otherwise; more precisely, for each read of it (a followed log's: a week).
API_TIMEOUT_SECONDS = 60.0
#: The longest a connect waits: longer means no API server answers at that address.
CONNECT_SECONDS = 10.0
#: Lists wait this many times the request timeout: the API server sends nothing until it has
#: built the whole list (4,096 pods took 7 to 40 s on the test VM).
LIST_TIMEOUT_FACTOR = 5.0
#: Connects tried again after the first fails (refused, reset, timed out).
CONNECT_RETRIES = 2
#: GETs tried again when the server asks to be (429 or 503 with Retry-After).
STATUS_RETRIES = 2
#: The longest wait for a Retry-After (the kube-apiserver asks for 1 s).
RETRY_AFTER_MAX_SECONDS = 2.0
#: The longest ``PROCMESH_API_TIMEOUT`` (a day; lists wait five times it).
MAX_API_TIMEOUT_SECONDS = 86400.0
#: Each read of a followed log waits this long (a week), its answer's included: a log may be
#: quiet for hours, and the kubelet sends a followed log's headers with its first bytes (v1.36
#: ``pkg/kubelet/server/server.go``, ``getContainerLogs``), so a quiet pod's answer comes only
#: with its next line. A server that went away is found by TCP keepalive instead
#: (:func:`socket_options`). Also every read when ``PROCMESH_API_TIMEOUT=0``: the client refuses
#: a tuple with no read timeout (its arguments are validated: each above 0).
FOLLOW_READ_SECONDS = 7 * 24 * 3600.0
#: TCP keepalive of the client's connections: probed after this long without traffic, then
#: every KEEPALIVE_INTERVAL_SECONDS, dropped after KEEPALIVE_PROBES unanswered probes, so a
#: followed log (or any request) of an API server gone from the network (its host down, a
#: partition) fails within about a minute and a half instead of a week.
KEEPALIVE_IDLE_SECONDS = 30
KEEPALIVE_INTERVAL_SECONDS = 15
KEEPALIVE_PROBES = 4


def api_timeout_from(environ: Mapping[str, str]) -> float | None:
    """The request timeout: ``PROCMESH_API_TIMEOUT`` seconds if set (0: none), else
    :data:`API_TIMEOUT_SECONDS`."""
    raw = environ.get("PROCMESH_API_TIMEOUT", "").strip()
    if not raw:
        return API_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_API_TIMEOUT_SECONDS:  # NaN fails this too
        raise ValueError(f"PROCMESH_API_TIMEOUT={raw!r} is not a number of seconds up to "
                         f"{MAX_API_TIMEOUT_SECONDS:g}: give how long an API request may wait for the "
                         f"API server (0: no limit)")
    return seconds or None


def retries() -> Any:
    """The retry policy of the API clients this package makes (``Configuration.retries``): a
    connect that failed (refused, timed out, a name not resolved), :data:`CONNECT_RETRIES` times
    after 0 and 1 s; a GET the server answered 429 or 503 with ``Retry-After`` (throttling, a
    shutdown), twice, after the time it asks (:data:`RETRY_AFTER_MAX_SECONDS` at most); nothing
    sent and not answered is sent again."""
    import urllib3

    class CappedRetry(urllib3.Retry):
        """urllib3's Retry, waiting no longer than RETRY_AFTER_MAX_SECONDS for a Retry-After
        (its own ceiling is six hours; a wait with a deadline must not sleep past it)."""

        def get_retry_after(self, response: Any) -> float | None:
            seconds: float | None = super().get_retry_after(response)
            return None if seconds is None else min(seconds, RETRY_AFTER_MAX_SECONDS)

    return CappedRetry(total=CONNECT_RETRIES + STATUS_RETRIES, connect=CONNECT_RETRIES, read=0,
                       status=STATUS_RETRIES, other=0, redirect=2, backoff_factor=0.5,
                       allowed_methods=frozenset({"GET", "HEAD"}), respect_retry_after_header=True,
                       raise_on_status=False)


#: The least a request of a wait with a deadline is given, however little the wait has left.
MIN_REQUEST_SECONDS = 1.0


def time_left(deadline: float) -> float:
    """The timeout for a request of a wait that ends at ``deadline`` (``time.monotonic()``):
    what is left, :data:`MIN_REQUEST_SECONDS` at least."""
    return max(MIN_REQUEST_SECONDS, deadline - time.monotonic())


def request_timeout(limit: float | None, read_factor: float = 1.0,
                    deadline: float | None = None) -> tuple[float, float] | None:
    """The client's ``_request_timeout`` for a request timeout ``limit`` (None: none): the connect
    capped at :data:`CONNECT_SECONDS`, each read ``limit * read_factor`` (``read_factor`` 0:
    :data:`FOLLOW_READ_SECONDS`, for a followed log); both at most ``deadline`` seconds (what a
    caller's wait has left), where given."""
    if limit is None and deadline is None:
        return None
    connect = CONNECT_SECONDS if limit is None else min(limit, CONNECT_SECONDS)
    read = FOLLOW_READ_SECONDS if limit is None or not read_factor else limit * read_factor
    if deadline is not None:
        connect, read = min(connect, deadline), min(read, deadline)
    return connect, read


def socket_options() -> list[tuple[int, int, int]]:
    """The client's socket options (``Configuration.socket_options``): urllib3's own (no
    Nagle), and TCP keepalive as the ``KEEPALIVE_*`` constants say (where the system lacks an
    option, its default stands)."""
    import socket

    import urllib3

    options: list[tuple[int, int, int]] = list(urllib3.connection.HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    idle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)  # macOS's name
    if idle is not None:
        options.append((socket.IPPROTO_TCP, idle, KEEPALIVE_IDLE_SECONDS))
    for name, value in (("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_SECONDS), ("TCP_KEEPCNT", KEEPALIVE_PROBES)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


def send(call: Callable[..., T], *args: Any, host: str, what: str, limit: float | None,
         read_factor: float = 1.0, deadline: float | None = None, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` with the request timeout (:func:`request_timeout`); urllib3's
    errors (the server not reached, or not answering) raised as this package's, naming ``what``
    was asked of ``host``."""
    import urllib3.exceptions as u

    timeout = request_timeout(limit, read_factor, deadline)
    try:
        return call(*args, _request_timeout=timeout, **kwargs)
    except u.HTTPError as exc:
        cause = getattr(exc, "reason", None) or exc
        if isinstance(cause, u.SSLError):
            raise KubernetesMeshError(
                f"TLS with the API server {host} failed to {what}: {cause}; check the kubeconfig's server "
                f"address and certificate-authority") from None
        if isinstance(cause, u.NameResolutionError):  # tried as a connect, then said so
            raise KubernetesMeshError(
                f"cannot resolve the API server's host ({host}) to {what}: {cause}; check the "
                f"kubeconfig's server address") from None
        if isinstance(cause, u.ReadTimeoutError) and timeout is not None:
            scaled = f" (a list waits {read_factor:g} times it)" if read_factor not in (0, 1) and \
                limit is not None and timeout[1] == limit * read_factor else ""
            raise ApiServerUnreachable(
                f"the API server {host} did not answer a request to {what} within {timeout[1]:g} s: is it "
                f"up and reachable from here? PROCMESH_API_TIMEOUT sets how long a request waits, in "
                f"seconds{scaled}") from None
        # (urllib3 makes a refused connection a NewConnectionError, a kind of ConnectTimeoutError)
        if isinstance(cause, u.ConnectTimeoutError) and not isinstance(cause, u.NewConnectionError) \
                and timeout is not None:
            raise ApiServerUnreachable(
                f"cannot reach the API server {host} to {what}: no connection within {timeout[0]:g} s "
                f"({CONNECT_RETRIES + 1} tries); is it up, and is the kubeconfig's server address "
                f"right?") from None
        raise ApiServerUnreachable(
            f"cannot reach the API server {host} to {what}: {cause}; is it up, and is the kubeconfig's "
            f"server address right?") from None
