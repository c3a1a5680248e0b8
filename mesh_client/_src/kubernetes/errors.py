"""Errors of the Kubernetes backend: each says what is wrong and what to do."""

from __future__ import annotations


class KubernetesMeshError(RuntimeError):
    """Base class of the Kubernetes backend's errors."""


class MeshNotFound(KubernetesMeshError):
    """The ProcMesh resource does not exist."""


class MeshNotReady(KubernetesMeshError):
    """The ProcMesh did not become Ready (or cannot): ``reason`` is the CamelCase cause."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class MeshAccessDenied(KubernetesMeshError, PermissionError):
    """The API server refused a request the client needs; the message names the permission."""


class ApiServerUnreachable(KubernetesMeshError, ConnectionError):
    """The API server could not be reached, did not answer in time (``PROCMESH_API_TIMEOUT``),
    or answered that it cannot serve now (429, 503, 504): worth asking again later."""
