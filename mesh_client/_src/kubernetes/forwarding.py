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
    from kubernetes.stream.ws_client import create_websocket
    from websocket import WebSocketBadStatusException, WebSocketException

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
        try:
            websocket = create_websocket(configuration, url, headers)  # type: ignore[no-untyped-call]
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
