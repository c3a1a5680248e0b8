"""A label-selected list-then-watch of one resource under one path, as a client-go reflector,
each object projected as it is decoded and handed to a callback.

A list (paged, projected page by page) delivers every object as an event of type None (as
kopf's initial listing does) and then hands the whole list to ``listed`` (a reflector's
Replace: an object deleted while no watch ran has no DELETED event, only its absence from that
list); the watch resumes from the newest resourceVersion seen (bookmarks included) whenever the
server ends it, and lists again when the version is too old (410 Gone) or the watch fails (after
a pause doubling from 1 s to 30 s). Server-side label selection keeps everything else (the
cluster's other pods, Services, Roles) off the operator's wire and out of its memory; kopf would
watch the whole resource and filter each event in the operator.
Used by :mod:`.podwatch` (proc pods), :mod:`.childwatch` (a mesh's Service and Role),
:mod:`.meshwatch` (ProcMeshes) and :mod:`.workloadwatch` (Kueue's Workloads).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from procmesh_operator import kubeclient

logger = logging.getLogger("procmesh_operator.listwatch")

#: The server ends each watch after about this long (and the watch is made again from where it
#: was): shorter than any load balancer's idle cut, as kopf's server_timeout.
WATCH_SECONDS = 300
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0

Deliver = Callable[[str | None, dict[str, Any]], None]
#: Called after each list with the namespace (None: every one), the listed objects and the
#: list's resourceVersion.
Listed = Callable[[str | None, list[dict[str, Any]], str], None]
Project = Callable[[Mapping[str, Any]], dict[str, Any]]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def namespace_of(path: str) -> str | None:
    """The namespace of a core or group resource path (None: every namespace)."""
    parts = path.strip("/").split("/")
    try:
        at = parts.index("namespaces")
    except ValueError:
        return None
    return parts[at + 1] if at + 2 < len(parts) else None


class ListWatch:
    """Lists and watches the objects under ``path`` that match ``selector`` while it runs."""

    def __init__(self, client: kubeclient.KubeClient, path: str, selector: str,
                 project: Project, deliver: Deliver, listed: Listed | None = None, *,
                 optional: bool = False) -> None:
        self.client = client
        # A resource that may not be served (another project's CRD), or not to us (RBAC): its
        # 404 or 403 is said once, at info, and then looked for again quietly at each pause,
        # not warned of every 30 s.
        self.optional = optional
        self._absent = False
        self.path = path
        self.selector = selector
        self.project = project
        self.deliver = deliver
        self.listed = listed
        self.namespace = namespace_of(path)
        self.lists = 0  # how many times it listed (a test reads it)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"watch {self.path}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _projected(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The projection, with the path's namespace (list items may leave it out)."""
        slim = self.project(obj)
        if self.namespace is not None:
            slim.setdefault("metadata", {}).setdefault("namespace", self.namespace)
        return slim

    async def run(self) -> None:
        pause = RETRY_FIRST_SECONDS
        while True:
            try:
                version = await self.list_once()
                while True:
                    version = await self.watch_once(version)
                    pause = RETRY_FIRST_SECONDS  # a watch that ended well: the pause resets
            except Expired:
                logger.info("watch of %s expired; listing again", self.path)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the watch must outlive any failure
                if self.optional and isinstance(e, kubeclient.ApiError) and e.status in (403, 404):
                    if not self._absent:  # 403: the chart's rbac.kueue is off, say
                        why = ("its CRD is not installed" if e.not_found else
                               "this operator may not list it")
                        logger.info("%s is not served to this operator (%s): looked for again "
                                    "every %.0f s at most", self.path, why, RETRY_MAX_SECONDS)
                    self._absent = True
                else:
                    logger.warning("watch of %s failed (listing again in %.0f s): %s",
                                   self.path, pause, e)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX_SECONDS)

    async def list_once(self) -> str:
        """Every matching object, delivered as type None, then handed to ``listed`` as a
        whole; returns the list's version."""
        self.lists += 1
        listed = await self.client.list_paged(self.path, label_selector=self.selector,
                                              transform=self._projected)
        if self._absent:
            logger.info("%s is served again: watching it", self.path)
            self._absent = False
        items = listed.get("items") or []
        for item in items:
            self.deliver(None, item)
        version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        if self.listed is not None:
            self.listed(self.namespace, items, version)
        return version

    async def watch_once(self, version: str) -> str:
        """One watch from ``version`` until the server ends it; returns the newest version."""
        params = {"labelSelector": self.selector, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(WATCH_SECONDS)}
        if version:
            params["resourceVersion"] = version
        async for event in self.client.watch(self.path, params):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Expired(str(obj.get("message") or "410 Gone"))
                raise kubeclient.ApiError(int(obj.get("code") or 500),
                                          str(obj.get("reason") or "WatchError"),
                                          str(obj.get("message") or obj))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.deliver(kind, self._projected(obj))
        return version
