"""REST calls to the apiserver as the node (client certificate ``system:node:<name>``).

A thin layer over ``requests`` that speaks JSON dicts, so the rest of the process node works on
plain Kubernetes objects. One ``requests.Session`` per thread. Used by every other module of
:mod:`tests.cluster.process_node` that talks to the API.
"""

from __future__ import annotations

import base64
import datetime
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(RuntimeError):
    """A non-2xx answer; ``status`` is the HTTP code, ``body`` the decoded Status if any."""

    def __init__(self, status: int, body: Any, what: str) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{what}: HTTP {status}: {message}")
        self.status = status
        self.body = body


def now() -> str:
    """The current time as Kubernetes writes a Time (RFC 3339, seconds, UTC)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """The current time as a MicroTime (Lease renewTime)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Api:
    """The apiserver, as seen through one kubeconfig written by :mod:`tests.cluster.kubeconfigs`."""

    def __init__(self, kubeconfig: Path, scratch: Path) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server: str = cluster["server"]
        scratch.mkdir(parents=True, exist_ok=True)
        self._ca = scratch / "api-ca.crt"
        self._cert = scratch / "api-client.crt"
        self._key = scratch / "api-client.key"
        self._ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        self._cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        self._key.write_bytes(base64.b64decode(user["client-key-data"]))
        self._key.chmod(0o600)
        self._local = threading.local()

    @property
    def ca_file(self) -> Path:
        return self._ca

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            # Ignore REQUESTS_CA_BUNDLE and proxy variables: our CA only, straight to loopback.
            session.trust_env = False
            session.verify = str(self._ca)
            session.cert = (str(self._cert), str(self._key))
            self._local.session = session
        return session

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                body: Any = None, content_type: str = "application/json",
                timeout: float = 30) -> Any:
        """One call; returns the decoded JSON answer or raises :class:`ApiError`."""
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        response = self._session().request(method, self.server + path, params=params, data=data,
                                           headers=headers, timeout=timeout)
        if response.status_code >= 300:
            try:
                detail = response.json()
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail, f"{method} {path}")
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        """GET, or None on 404."""
        try:
            return self.request("GET", path, params=params or None)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def create(self, path: str, body: Obj) -> Obj:
        return self.request("POST", path, body=body)  # type: ignore[no-any-return]

    def patch(self, path: str, body: Obj, content_type: str = STRATEGIC) -> Obj:
        return self.request("PATCH", path, body=body, content_type=content_type)  # type: ignore[no-any-return]

    def delete(self, path: str, body: Obj | None = None) -> Any:
        return self.request("DELETE", path, body=body)

    def watch(self, path: str, params: dict[str, Any], timeout_seconds: int = 300) -> Iterator[Obj]:
        """Stream watch events (dicts with ``type`` and ``object``) until the server ends it."""
        params = dict(params, watch="true", timeoutSeconds=str(timeout_seconds),
                      allowWatchBookmarks="true")
        with self._session().get(self.server + path, params=params, stream=True,
                                 timeout=(10, timeout_seconds + 30)) as response:
            if response.status_code >= 300:
                raise ApiError(response.status_code, response.text, f"WATCH {path}")
            for line in response.iter_lines():
                if line:
                    yield json.loads(line)

    def event(self, pod: Obj, node: str, reason: str, message: str, kind: str = "Normal") -> None:
        """Record a core/v1 Event about ``pod``, as a kubelet does; failures are ignored."""
        meta = pod["metadata"]
        stamp = now()
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "reason": reason, "message": message, "type": kind,
            "source": {"component": "kubelet", "host": node},
            "reportingComponent": "kubelet", "reportingInstance": node,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            self.create(f"/api/v1/namespaces/{meta['namespace']}/events", body)
        except (ApiError, requests.RequestException):
            pass
