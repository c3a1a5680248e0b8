"""A small async client for the Kubernetes REST API: JSON in, JSON out, every request counted.

The only module of the operator that speaks HTTP. It takes a ``kubernetes.client.Configuration``
(loaded by :mod:`.__main__` from the kubeconfig or in-cluster) for the server, TLS material and
token, and returns plain dicts, which is what :mod:`.rendering` builds and :mod:`.planning`
reads. Errors become :class:`ApiError` with the server's status code and message.
Used by :mod:`.reconciling` (children, status, the pod lists that :mod:`.stores` caches, pod
groups and leases), :mod:`.claiming` (ResourceClaims and ResourceSlices) and :mod:`.eventing`
(Events); :mod:`.metrics` counts its requests. Unit tests fake it at this level.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp

from mesh_client._src import contract
from procmesh_operator import names

MERGE_PATCH = "application/merge-patch+json"
#: Items per page of :meth:`KubeClient.list_paged` (the API server's own default chunk is 500).
LIST_PAGE_SIZE = 500
#: Bound on the pages of one list (a million items at the default size).
MAX_LIST_PAGES = 2000
#: Connections to the API server for requests, and so requests in flight; more wait their
#: turn untimed. Each watch (:meth:`KubeClient.watch`) holds a connection of its own beside
#: them: three per watched namespace (pods, Services, Roles), so the pool itself is unbounded.
#: A fixed share for watches (8 once) let a few dozen namespaces' watches hold every
#: connection, and requests then timed out waiting for one (aiohttp counts that wait against
#: the connect timeout).
CONNECTIONS = 64
#: How long one request may take in all (seconds).
REQUEST_TIMEOUT_SECONDS = 60.0
#: A watch that sends nothing (not even a bookmark) for this long is taken as lost.
WATCH_READ_TIMEOUT = 360.0


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


class Unanswered(Exception):
    """A request that got no answer: the connection failed, or the API server did not answer
    within the client's timeout. Not an :class:`ApiError` (there is no status to judge by);
    the reconcile reports it in the mesh's Degraded condition as it does an ApiError."""


def pods_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/pods"
    return base if name is None else f"{base}/{name}"


def core_path(namespace: str, plural: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/{plural}"
    return base if name is None else f"{base}/{name}"


def roles_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles"
    return f"{base}/{name}" if name else base


def mesh_path(namespace: str, name: str | None = None, *, status: bool = False) -> str:
    base = f"/apis/{contract.GROUP}/{contract.VERSION}/namespaces/{namespace}/{contract.PLURAL}"
    if name is not None:
        base = f"{base}/{name}"
    return f"{base}/status" if status else base


def _resource_of(path: str) -> str:
    """The resource in an API path (``pods``, ``procmeshes/status``), for the request counter."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    rest = parts[2:] if parts[0] == "api" else parts[3:]  # drop api/v1 or apis/<group>/<version>
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:] or ["namespaces"]
    if not rest:
        return "discovery"  # a group version's resource list (/apis/<group>/<version>)
    resource = rest[0]
    return f"{resource}/{rest[2]}" if len(rest) == 3 else resource


def decode(status: int, reason: str, text: str) -> Any:
    """A response's JSON body, or :class:`ApiError` for an error status. Errors are not always
    a JSON Status: a group version the API server does not serve answers ``404 page not
    found`` in plain text, which must read as Not Found, not as a decoding failure."""
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        if status < 400:
            raise ApiError(status, reason, f"the API server sent a body that is not JSON: "
                                           f"{text[:200]!r}") from None
        data = text.strip()
    if status >= 400:
        if isinstance(data, dict):
            raise ApiError(status, str(data.get("reason") or reason),
                           str(data.get("message") or data))
        raise ApiError(status, reason, str(data or reason))
    return data


class KubeClient:
    """Async JSON access to one API server. Create inside the running event loop."""

    def __init__(self, config: Any, *,
                 on_request: Callable[[str, str, int], None] | None = None) -> None:
        self._config = config
        self._on_request = on_request
        self._session: aiohttp.ClientSession | None = None
        # Requests past CONNECTIONS wait here, not in aiohttp's pool, whose wait counts against
        # the connect timeout: 3,200 pod creates at once (100 meshes) failed there.
        self._slots: asyncio.Semaphore | None = None
        #: Requests made, by (verb, resource): what the benchmark reports per mesh.
        self.counts: dict[tuple[str, str], int] = {}

    def _ssl(self) -> ssl.SSLContext | bool:
        config = self._config
        if not str(config.host).startswith("https"):
            return False
        ctx = ssl.create_default_context(cafile=config.ssl_ca_cert or None)
        if not config.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if config.cert_file:
            ctx.load_cert_chain(config.cert_file, config.key_file)
        return ctx

    def _headers(self) -> dict[str, str]:
        config = self._config
        hook = getattr(config, "refresh_api_key_hook", None)
        if hook is not None:
            hook(config)  # in-cluster: re-reads the rotated service account token when due
        token = (config.get_api_key_with_prefix("BearerToken")
                 or config.get_api_key_with_prefix("authorization"))
        headers = {"Accept": "application/json", "User-Agent": names.FIELD_MANAGER}
        if token:
            headers["Authorization"] = token if " " in token else f"Bearer {token}"
        return headers

    async def _ensure(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, ssl=self._ssl())  # see CONNECTIONS
            self._session = aiohttp.ClientSession(
                base_url=None, connector=connector,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS, connect=10))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json") -> Any:
        """One API call; returns the decoded JSON body or raises :class:`ApiError`."""
        session = await self._ensure()
        if self._slots is None:
            self._slots = asyncio.Semaphore(CONNECTIONS)
        headers = self._headers()
        if body is not None:
            headers["Content-Type"] = content_type
        url = str(self._config.host).rstrip("/") + path
        try:
            async with self._slots, session.request(method, url, params=params, json=body,
                                                    headers=headers) as response:
                key = (method.lower(), _resource_of(path))
                self.counts[key] = self.counts.get(key, 0) + 1
                if self._on_request is not None:
                    self._on_request(key[0], key[1], response.status)
                return decode(response.status, str(response.reason), await response.text())
        except aiohttp.ClientError as e:  # first: its connect timeout is a TimeoutError too
            raise Unanswered(f"{method} {path}: {type(e).__name__}: {e}") from None
        except asyncio.TimeoutError:
            raise Unanswered(f"{method} {path}: the API server did not answer within "
                             f"{REQUEST_TIMEOUT_SECONDS:g} s") from None

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request (``watch=1`` is added), decoded one line at a time
        until the server ends the stream. Not one of the CONNECTIONS: it holds its connection
        for as long as it lasts, with no total timeout, only one between two reads."""
        session = await self._ensure()
        url = str(self._config.host).rstrip("/") + path
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=WATCH_READ_TIMEOUT)
        async with session.get(url, params={**params, "watch": "1"}, headers=self._headers(),
                               timeout=timeout) as response:
            key = ("watch", _resource_of(path))
            self.counts[key] = self.counts.get(key, 0) + 1
            if self._on_request is not None:
                self._on_request(key[0], key[1], response.status)
            if response.status >= 400:
                decode(response.status, str(response.reason), await response.text())
            pending = b""
            async for chunk in response.content.iter_any():
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            if pending.strip():
                yield json.loads(pending)

    # --- Verbs ---------------------------------------------------------------------------------

    async def get(self, path: str) -> dict[str, Any]:
        return dict(await self.request("GET", path))

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.get(path)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def list(self, path: str, *, label_selector: str | None = None) -> dict[str, Any]:
        params = {"labelSelector": label_selector} if label_selector else None
        return dict(await self.request("GET", path, params=params))

    async def list_paged(self, path: str, *, label_selector: str | None = None,
                         page_size: int = LIST_PAGE_SIZE,
                         transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                         ) -> dict[str, Any]:
        """:meth:`list` in pages of ``page_size`` (``limit``/``continue``: one consistent
        snapshot, whose resourceVersion is returned), each item passed through ``transform``
        as its page arrives: thousands of pods never sit in memory whole at once, only one
        page of them."""
        items: list[dict[str, Any]] = []
        resource_version = ""
        token = ""
        for _ in range(MAX_LIST_PAGES):
            params = {"limit": str(page_size)}
            if label_selector:
                params["labelSelector"] = label_selector
            if token:
                params["continue"] = token
            page = dict(await self.request("GET", path, params=params))
            meta = page.get("metadata") or {}
            resource_version = resource_version or str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                items.append(transform(item) if transform is not None else item)
            del page
            token = str(meta.get("continue") or "")
            if not token:
                break
        else:
            raise ApiError(500, "TooManyPages", f"listing {path} took more than "
                                                f"{MAX_LIST_PAGES} pages of {page_size}")
        return {"metadata": {"resourceVersion": resource_version}, "items": items}

    async def create(self, path: str, body: Mapping[str, Any], *,
                     dry_run: bool = False) -> dict[str, Any]:
        """POST; ``dry_run``: admitted and checked against storage (AlreadyExists included),
        never persisted (``dryRun=All``)."""
        params = {"dryRun": "All"} if dry_run else None
        return dict(await self.request("POST", path, params=params, body=body))

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: the whole object, on the resourceVersion in its metadata (409 if it moved)."""
        return dict(await self.request("PUT", path, body=body))

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return dict(await self.request("PATCH", path, body=body, content_type=MERGE_PATCH))

    async def delete(self, path: str, *, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> dict[str, Any] | None:
        """Delete, only the incarnation ``uid`` if given; None when it is already gone.
        ``grace_period_seconds=0`` is a force delete (the object goes without its kubelet)."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            result = await self.request("DELETE", path, body=body)
        except ApiError as e:
            if e.not_found or e.conflict:  # gone, or a newer incarnation holds the name
                return None
            raise
        return dict(result) if isinstance(result, dict) else None
