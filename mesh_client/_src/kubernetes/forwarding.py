"""Reaching proc pods through the API server (``pods/portforward``), for clients outside the
cluster network: each proc's stream is a port-forward, authorized by the client's own
credentials; the mesh token then authenticates it end to end with the proc server."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mesh_client._src.kubernetes.errors import MeshAccessDenied
from mesh_client._src.runtime import streams


class ForwardedStream(streams.SocketStream):
    """The local end of a port-forward; keeps the forward (and its relay thread) alive."""

    #: The handshake's first bytes wait on the API server and the kubelet opening the stream
    #: into the pod (seconds on a loaded node): a longer bound than a direct TCP connection's.
    handshake_timeout = 30.0

    def __init__(self, forward: Any, port: int) -> None:
        super().__init__(forward.socket(port))
        self.forward = forward

    def close(self) -> None:
        super().close()
        try:
            self.forward.close()
        except Exception:
            pass


def port_forward_opener(
    api_client: Any, namespace: str, pods: Mapping[tuple[str, int], str]
) -> Callable[[tuple[str, int], float], streams.SocketStream]:
    """An opener for ``channel.connect`` that port-forwards to the pod serving each address."""
    from kubernetes import client
    from kubernetes.stream import portforward

    core = client.CoreV1Api(api_client)

    def open_(address: tuple[str, int], timeout: float) -> streams.SocketStream:
        pod, port = pods[address], address[1]
        try:
            forward = portforward(core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))
        except client.ApiException as exc:
            if "403" in str(exc.reason):
                raise MeshAccessDenied(
                    f"the API server refused to port-forward to pod {namespace}/{pod}: this client needs "
                    f"the 'create' and 'get' permissions on pods/portforward in namespace {namespace}"
                ) from None
            raise ConnectionError(f"cannot port-forward to pod {namespace}/{pod}:{port}: {exc.reason}") from None
        return ForwardedStream(forward, port)

    return open_
