"""The operator's own watch of proc pods: list, then watch from the list's resourceVersion, each
event projected (:func:`projections.slim_pod`) as it is decoded and handed to the controller.

kopf would handle every pod event as an object of its own: a worker task per pod, its handler
machinery per event, and the whole decoded pod held by each idle worker for seconds after its
last event. At thousands of pods starting at once that was a sixth of the operator's CPU and
most of its peak memory (benchmarks/results/scale.md, third pass). Here an event costs its JSON
decoding, the projection and :meth:`reconciling.Controller.pod_event`; nothing of it outlives
the call but the slim pod the store keeps.

Semantics, as a client-go reflector's: a list (paged, projected page by page) delivers every pod
as an event of type None (as kopf's initial listing does); the watch resumes from the newest
resourceVersion seen (bookmarks included) whenever the server ends it, and lists again when the
version is too old (410 Gone) or the watch fails (after a pause doubling from 1 s to 30 s). A
deletion missed across a relist is repaired by that list (:meth:`PodStore.repair`, through the
controller's :meth:`~procmesh_operator.reconciling.Controller.pods_listed`).
One :class:`PodWatch` per path: ``/api/v1/pods`` for every namespace, else one per namespace.
:mod:`.__main__` falls back to kopf's watch for namespace globs, and with peering (kopf pauses
its watches while another replica is active; nothing would pause this one). Started by
:mod:`.handlers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import kubeclient, projections

logger = logging.getLogger("procmesh_operator.podwatch")

#: The server ends each watch after about this long (and the watch is made again from where it
#: was): shorter than any load balancer's idle cut, as kopf's server_timeout.
WATCH_SECONDS = 300
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0

Deliver = Callable[[str | None, dict[str, Any]], None]
#: Called after each list with the namespace (None: every one), the listed pods and the list's
#: resourceVersion: what the list proves gone (a deletion missed while no watch ran) is dropped.
Listed = Callable[[str | None, list[dict[str, Any]], str], None]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def all_namespaces_path() -> str:
    return "/api/v1/pods"


def slim_event_object(obj: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """The projected pod of an event or list item (list items may leave out the namespace)."""
    slim = projections.slim_pod(obj)
    if namespace is not None:
        slim["metadata"].setdefault("namespace", namespace)
    return slim


def namespace_of(path: str) -> str | None:
    """The namespace of a pods path (None: every namespace)."""
    parts = path.strip("/").split("/")
    return parts[3] if len(parts) >= 4 and parts[2] == "namespaces" else None


class PodWatch:
    """Lists and watches the proc pods under ``path`` for as long as it runs."""

    def __init__(self, client: kubeclient.KubeClient, path: str, deliver: Deliver,
                 listed: Listed | None = None) -> None:
        self.client = client
        self.path = path
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

    async def run(self) -> None:
        pause = RETRY_FIRST_SECONDS
        while True:
            try:
                version = await self.list_once()
                while True:
                    version = await self.watch_once(version)
                    pause = RETRY_FIRST_SECONDS  # a watch that ended well: the pause resets
            except Expired:
                logger.info("pod watch of %s expired; listing again", self.path)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the watch must outlive any failure
                logger.warning("pod watch of %s failed (listing again in %.0f s): %s",
                               self.path, pause, e)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX_SECONDS)

    async def list_once(self) -> str:
        """Every proc pod under the path, delivered as type None, then handed to ``listed`` as
        a whole (a reflector's Replace: a pod deleted while no watch ran has no DELETED event,
        only its absence from this list); returns the list's version."""
        self.lists += 1
        listed = await self.client.list_paged(
            self.path, label_selector=contract.MESH_LABEL,
            transform=lambda item: slim_event_object(item, self.namespace))
        items = listed.get("items") or []
        for pod in items:
            self.deliver(None, pod)
        version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        if self.listed is not None:
            self.listed(self.namespace, items, version)
        return version

    async def watch_once(self, version: str) -> str:
        """One watch from ``version`` until the server ends it; returns the newest version."""
        params = {"labelSelector": contract.MESH_LABEL, "allowWatchBookmarks": "true",
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
                self.deliver(kind, slim_event_object(obj, self.namespace))
        return version
