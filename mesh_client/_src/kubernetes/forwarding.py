"""Reaching proc pods through the API server (``pods/portforward``), for clients outside the
cluster network: each proc's stream is a port-forward, authorized by the client's own
credentials; the mesh token then authenticates it end to end with the proc server."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mesh_client._src.kubernetes.errors import MeshAccessDenied
from mesh_client._src.runtime import streams

if TYPE_CHECKING:  # imported when a forward opens: websocket-client comes with the kubernetes extra
    from mesh_client._src.kubernetes import portforwards


class ForwardedStream(streams.SocketStream):
    """The local end of a port-forward; keeps the forward (and its relay thread) alive."""

    #: The handshake's first bytes wait on the API server and the kubelet opening the stream
    #: into the pod (seconds on a loaded node): a longer bound than a direct TCP connection's.
    handshake_timeout = 30.0

    def __init__(self, forward: portforwards.PortForward) -> None:
        super().__init__(forward.socket)
        self.forward = forward

    def write(self, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        try:
            super().write(pieces)
        except OSError as exc:  # the relay closed its end: say what the kubelet said, if it did
            said = self.forward.error
            raise ConnectionError(
                f"{exc.strerror}: the port-forward to port {self.forward.port} closed"
                + (f"; the kubelet said: {said}" if said else " (the API server or the kubelet ended the stream)")
            ) from exc

    def close(self) -> None:
        super().close()
        self.forward.close()


def port_forward_opener(
    api_client: Any, namespace: str, pods: Mapping[tuple[str, int], str]
) -> Callable[[tuple[str, int], float], streams.SocketStream]:
    """An opener for ``channel.connect`` that port-forwards to the pod serving each address."""
    from websocket import WebSocketBadStatusException, WebSocketException, WebSocketTimeoutException

    from mesh_client._src.kubernetes import portforwards

    configuration = api_client.configuration

    def open_(address: tuple[str, int], timeout: float) -> streams.SocketStream:
        pod, port = pods[address], address[1]
        url = (f"{configuration.host}/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/portforward"
               f"?ports={port}")
        url = "ws" + url[len("http"):] if url.startswith("http") else url
        headers = {"sec-websocket-protocol": portforwards.PROTOCOL}
        bearer = configuration.auth_settings().get("BearerToken")
        if bearer and bearer.get("value"):
            headers["authorization"] = bearer["value"]
        bound = max(timeout, ForwardedStream.handshake_timeout)
        try:
            websocket = _websocket(configuration, url, headers, bound)
        except (WebSocketTimeoutException, TimeoutError):
            raise ConnectionError(
                f"cannot port-forward to pod {namespace}/{pod}:{port}: the API server did not answer within "
                f"{bound:g} s (connection, TLS and WebSocket upgrade); is it overloaded, or a proxy in the way?"
            ) from None
        except WebSocketBadStatusException as exc:
            if exc.status_code == 403:
                raise MeshAccessDenied(
                    f"the API server refused to port-forward to pod {namespace}/{pod}: this client needs "
                    f"the 'create' and 'get' permissions on pods/portforward in namespace {namespace}"
                ) from None
            raise ConnectionError(f"cannot port-forward to pod {namespace}/{pod}:{port}: {exc}") from None
        except (OSError, WebSocketException) as exc:
            raise ConnectionError(f"cannot port-forward to pod {namespace}/{pod}:{port}: {exc}") from None
        return ForwardedStream(portforwards.PortForward(websocket, port))

    return open_


def _websocket(configuration: Any, url: str, headers: Mapping[str, str], timeout: float) -> Any:
    """The WebSocket of one forward, connected within ``timeout`` seconds.

    ``kubernetes.stream.ws_client.create_websocket`` takes no timeout, so an API server that
    accepts the connection and never answers the upgrade would hold the caller forever; this
    makes the same connection (the client's TLS settings, certificates and proxy) with a bound.
    After the upgrade the socket blocks again: the relay waits in ``select()``, not on timeouts."""
    import ssl

    import certifi
    from kubernetes.stream.ws_client import websocket_proxycare
    from websocket import WebSocket

    tls: dict[str, Any]
    if url.startswith("wss://") and configuration.verify_ssl:
        tls = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": configuration.ssl_ca_cert or certifi.where()}
        if configuration.assert_hostname is not None:
            tls["check_hostname"] = configuration.assert_hostname
    else:
        tls = {"cert_reqs": ssl.CERT_NONE}
    for option, value in (("certfile", configuration.cert_file), ("keyfile", configuration.key_file),
                          ("server_hostname", configuration.tls_server_name)):
        if value:
            tls[option] = value
    options: dict[str, Any] = {"header": [f"{name}: {value}" for name, value in headers.items()], "timeout": timeout}
    if configuration.proxy or configuration.proxy_headers:
        options = websocket_proxycare(options, configuration, url, headers)  # type: ignore[no-untyped-call]
    websocket = WebSocket(sslopt=tls, skip_utf8_validation=False)
    websocket.connect(url, **options)  # type: ignore[no-untyped-call]
    websocket.settimeout(None)
    return websocket
