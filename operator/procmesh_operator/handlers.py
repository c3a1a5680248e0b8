"""Thin kopf handlers: they feed events to the :class:`~procmesh_operator.reconciling.Controller`.

Every ProcMesh event, every proc pod event and every event of a mesh's Kueue Workload (from
:mod:`.meshwatch`, :mod:`.podwatch` and :mod:`.workloadwatch`, or from kopf with peering or
namespace globs) enqueues the mesh it concerns (node events only when a node is lost or back);
the reconcile itself (level-based, coalesced per mesh) lives in :mod:`.reconciling`. Only ``on.event`` handlers are used, so kopf writes nothing to our
objects (no finalizers, no progress annotations): deletion is left to garbage collection
through owner references. :func:`register` installs the handlers into a registry (a fresh one
per test, as in kopf).
"""

from __future__ import annotations

import copy
import marshal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kopf

from mesh_client._src import contract
from procmesh_operator import diffbases, projections, reconciling, workloads

DEFAULT_PEERING = "procmesh"
#: The key of the :class:`~procmesh_operator.reconciling.Controller` in kopf's memo.
CONTROLLER = "controller"


def register(registry: kopf.OperatorRegistry,
             make_controller: Callable[[], reconciling.Controller],
             login: Callable[..., kopf.ConnectionInfo], *,
             peering_name: str | None = None,
             pod_watch_paths: Sequence[str] | None = None) -> None:
    """Install the operator's handlers into ``registry``. The controller is made at startup,
    inside kopf's event loop, by ``make_controller``, and kept in the operator's root
    :class:`kopf.Memo`; kopf copies that memo into every resource's own before any resource
    handler runs, so each handler finds the controller there. Meshes and proc pods are watched
    by the controller's own :mod:`.meshwatch` and :mod:`.podwatch` under ``pod_watch_paths``
    when given, else by kopf."""

    @kopf.on.login(registry=registry)
    def login_handler(**kwargs: Any) -> kopf.ConnectionInfo:
        return login(**kwargs)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        # We post our own Events for mesh transitions; kopf would post one per handler log line.
        settings.posting.enabled = False
        # Event handlers only: kopf's per-event diff essence is never read (diffbases.py).
        settings.persistence.diffbase_storage = diffbases.NoDiffBase()
        # Long watches get silently stuck behind some load balancers (kopf#585, #957).
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.connect_timeout = 10
        if peering_name is not None:  # auto-detected: used only if the peering CRDs exist
            settings.peering.name = peering_name
        controller = make_controller()
        controller.start()
        if pod_watch_paths is not None:
            controller.watch_meshes(pod_watch_paths)
            controller.watch_workloads(pod_watch_paths)
            controller.watch_pods(pod_watch_paths)
        memo[CONTROLLER] = controller

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        controller = memo.pop(CONTROLLER, None)
        if controller is not None:
            await controller.stop()

    if pod_watch_paths is None:  # kopf's watches (peering, globs); else the controller's
        # Async on purpose: kopf runs sync handlers in threads, and the queue lives in the loop.
        @kopf.on.event(contract.GROUP, contract.VERSION, contract.PLURAL, registry=registry)
        async def mesh_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                             **_: Any) -> None:
            _controller(memo).mesh_event(type, _plain(body))

        # One worker per pod.
        @kopf.on.event("", "v1", "pods", labels={contract.MESH_LABEL: kopf.PRESENT},
                       registry=registry)
        async def pod_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                            **_: Any) -> None:
            # Projected before the copy: the operator keeps (and copies) only what it reads.
            _controller(memo).pod_event(type, _plain(projections.slim_pod(body)))

        # Kueue (admitting.py): a queued mesh's Workload, admitted or evicted. Without Kueue's
        # CRDs kopf logs once that it cannot serve it, and starts watching when they appear
        # (and ends the operator if they are deleted: workloadwatch.py).
        @kopf.on.event(workloads.GROUP, workloads.VERSION, workloads.PLURAL,
                       labels={contract.MESH_LABEL: kopf.PRESENT}, registry=registry)
        async def workload_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
            _controller(memo).workload_event(_plain(body))

    # Node loss (losses.py): the Ready condition of every node, and deletions.
    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        _controller(memo).node_event(type, _plain(body))

    @kopf.on.probe(id="meshes", registry=registry)
    async def meshes_probe(memo: kopf.Memo, **_: Any) -> int:
        controller = memo.get(CONTROLLER)
        return 0 if controller is None else _controller(memo).known_meshes()


def _controller(memo: kopf.Memo) -> reconciling.Controller:
    controller = memo[CONTROLLER]
    assert isinstance(controller, reconciling.Controller)
    return controller


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A detached plain-dict copy (kopf's Body is a live view of the latest event). Bodies are
    JSON (dicts, lists, strings, numbers), which marshal copies in C, several times faster than
    ``copy.deepcopy``: this runs once per pod event."""
    try:
        plain: dict[str, Any] = marshal.loads(marshal.dumps(dict(body)))
    except ValueError:  # something not JSON-like inside: the general copy
        plain = copy.deepcopy(dict(body))
    return plain
