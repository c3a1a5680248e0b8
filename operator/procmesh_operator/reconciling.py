"""The effectful reconcile of one ProcMesh, in a fixed order: secret -> access role -> service ->
(dra mode: ResourceClaims, :mod:`.claiming`) -> pod group -> pods -> gang -> status.

:class:`Controller` owns the API client, the pod cache (:mod:`.stores`) and the work queue
(:mod:`.queueing`); :mod:`.handlers` feeds it events. One reconcile reads the mesh as last watched or written (:mod:`.watched`; a GET only when
none is known),
creates the token Secret under a generated name recorded in status (:mod:`.token_secrets`;
create-only: it never reads one), ensures the mesh's access Role and
the headless Service, plans with :func:`planning.plan`, deletes then creates pods (through one
:class:`gates.PriorityGate` for all meshes, earlier meshes first), and writes
:func:`statuses.compute_status` through the status subresource only when it changed (progress
alone at most once per window, :mod:`.coalescing`; the procs' entries of pods unchanged since the
last reconcile come from :mod:`.proc_entries`). Pods come from :mod:`.podwatch`. It stops at the first API error, records it in the status, and lets the
queue retry with backoff. Pinned placement runs under one lock, so two meshes cannot claim the
same device budget at once; a mesh whose placement waits for room is looked at again when a
proc pod ends or a node becomes Ready and schedulable, or loses a taint. Node events keep a map of lost nodes and the set of Ready ones
(:mod:`.losses`): a node's change requeues the meshes with pods on it, every node lost at once
(an outage) holds them all, and a mesh with procs on a lost node is looked at again when their
toleration runs out. Every ``resync_seconds`` a relist repairs the pod cache.
The gang step (:mod:`.ganging`) creates the mesh's PodGroup before its pods where that API is
served, or, in gate mode, lifts the pods' scheduling gate once :mod:`.fitting` finds room for the
whole mesh, and recreates a released gang that stalls half-placed. A mesh labelled
``kueue.x-k8s.io/queue-name`` first goes through Kueue (:mod:`.admitting`): it is planned as
suspended until its Workload is admitted, and its status says why (:func:`workloads.overlay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import (
    admitting,
    childwatch,
    claiming,
    coalescing,
    crashloops,
    create_refusals,
    eventing,
    exit_points,
    fitting,
    ganging,
    gates,
    kubeclient,
    leading,
    leases,
    listwatch,
    losses,
    meshwatch,
    metrics,
    names,
    placing,
    planning,
    podwatch,
    proc_entries,
    projections,
    queueing,
    quotawatch,
    rendering,
    secret_probes,
    specs,
    statuses,
    stores,
    token_secrets,
    upgrading,
    watched,
    workloads,
    workloadwatch,
)
from procmesh_operator import settings as settings_

logger = logging.getLogger("procmesh_operator.reconcile")

Key = tuple[str, str]
WAITING_RECHECK_SECONDS = 5.0
#: Waits (contract.WAITING_REASONS) that end when a proc pod ends or a node becomes Ready (or
#: loses a taint).
ROOM_WAITS = frozenset({contract.WAITING_FOR_GPU_BUDGET, contract.WAITING_FOR_NODE})
#: How far a colocateWith path is followed to find a cycle through other meshes (a cycle of more
#: meshes than this is not found: no one colocates 64 meshes in a row).
MAX_COLOCATION_CHAIN = 64
#: A mesh that changed under a reconcile (:class:`Superseded`: another incarnation took its
#: name, or its status changed) is reconciled again, from its newest body, after this long.
CONFLICT_RETRY_SECONDS = 0.1
#: The longest pause between two reads of a waiting gang's PodGroup (doubling from
#: WAITING_RECHECK_SECONDS while it waits).
POD_GROUP_READ_MAX_SECONDS = 60.0
#: Children and fresh mesh reads at every this many resync passes (about 5 min at 30 s).
CHILD_CHECK_RESYNCS = 10


CHILD_KINDS = ("Role", "Service", "PodGroup")
#: The Warning event of a child found deleted under its mesh and created again.
CHILD_RECREATED = "ChildRecreated"


class Superseded(Exception):
    """A status write found the mesh changed under the reconcile (its status, or another
    incarnation under its name): nothing more is done from what that reconcile read."""


class ChildConflict(Exception):
    """A Role, Service or proc pod with a derived name exists and belongs to someone else."""


class Controller:
    """Everything one operator process knows and does about ProcMeshes."""

    def __init__(self, client: kubeclient.KubeClient, settings: settings_.Settings,
                 elector: leading.Elector | None = None) -> None:
        self.client = client
        self.settings = settings
        self.elector = elector  # leader election: only while it leads is anything reconciled
        self.store = stores.PodStore()
        self.queue: queueing.WorkQueue | None = None  # made in start(), inside the event loop
        self.events = eventing.EventPoster(client)
        # (mesh, child kind) -> the mesh uid it was ensured for; a child is checked when its
        # mesh is first reconciled and every CHILD_CHECK_RESYNCS resync passes after that
        # (_checked_at: the pass of each mesh's last check).
        self._ensured: dict[tuple[Key, str], str] = {}
        self._checked_at: dict[Key, int] = {}
        self.bodies = watched.MeshBodies()  # the meshes as last watched or written (no GET)
        self._placement_lock = asyncio.Lock()
        self._colocated_by: dict[Key, set[Key]] = {}  # partner -> meshes colocated with it
        # Meshes whose placement waits for room (ROOM_WAITS): looked at again when procs end or
        # a node becomes Ready, not only at the next resync.
        self._waiting_for_room: set[Key] = set()
        # Meshes whose pod create a ResourceQuota refused (full, or too small): looked at again
        # when a quota of their namespace changes (quotawatch.py), as well as at their retry.
        self._waiting_for_quota: set[Key] = set()
        self._phases: dict[Key, str] = {}
        self._last_status_rv: dict[Key, str] = {}
        # Progress-only status changes: at most one write per mesh per window (coalescing.py).
        self._throttle = coalescing.StatusThrottle(settings.status_progress_seconds)
        self._resync_task: asyncio.Task[None] | None = None
        self._losses: dict[str, losses.NodeLoss] = {}  # lost nodes by name (from the node watch)
        self._ready_nodes: set[str] = set()  # Ready nodes by name (from the node watch)
        # Of those, the ones not cordoned, with their NoSchedule/NoExecute taints.
        self._placeable_nodes: dict[str, frozenset[tuple[str, str, str]]] = {}
        self._outage_ended: float | None = None  # when every node was last lost at once, ended
        # Token Secrets: generated names, recorded in status (never a token kept or read).
        self._tokens = token_secrets.TokenSecrets(settings.test_exit_after)
        self._gang_mode: str | None = None  # ganging.POD_GROUP, GATE or OFF, resolved once
        self._gated: set[Key] = set()  # meshes whose pods wait at the gang gate
        # PodGroup mode: each rejected gang's PodGroup and fit check as last done (monotonic
        # time, how many so far, body, explanation): again only after a doubling pause.
        self._groups_read: dict[Key, tuple[float, int, dict[str, Any] | None, str | None]] = {}
        self._resyncs = 0  # resync passes so far (resync_once)
        # Gate mode: meshes whose released gang stalled -> (stalls so far, no release before
        # (monotonic), the Scheduled message).
        self._stalls: dict[Key, tuple[int, float, str]] = {}
        # Gate mode: meshes released as a whole gang and not all bound yet (a proc released
        # alone after a RestartProc is not: its stall must not take its running peers down).
        self._released: set[Key] = set()
        self._leases = leases.LeaseClock()  # spec.lease: when each renewal was last seen
        # Pod creates of all meshes, settings.create_concurrency at once, mesh after mesh
        # (gates.py): each mesh's place in line, given at its first create.
        self._creates = gates.PriorityGate(settings.create_concurrency)
        self._create_order: dict[Key, int] = {}
        self._orders = itertools.count()
        # dra: what slices last published of each allocated device (claiming.PublishedDevices).
        self._published = claiming.PublishedDevices()
        self._pod_watches: list[podwatch.PodWatch] = []  # ours, unless kopf watches pods
        self._mesh_watches: list[meshwatch.MeshWatch] = []  # likewise, for meshes
        self._workload_watches: list[listwatch.ListWatch] = []  # and Kueue's Workloads
        self._child_watches: list[listwatch.ListWatch] = []  # with ours (childwatch.py)
        self._quota_watches: list[listwatch.ListWatch] = []  # with ours (quotawatch.py)
        # Children whose deletion a watch saw, with the mesh uid they belonged to and the
        # deletion's number (_child_deletions): created again with a Warning event, even when
        # the mesh has no pods at that moment (every proc being replaced, RestartMesh).
        self._deleted_children: dict[tuple[Key, str], tuple[str, int]] = {}
        self._child_deletions = itertools.count(1)
        # Each mesh's status.procs entries as last computed (only changed pods are read again).
        self._entries: dict[Key, proc_entries.EntryMemo] = {}

    # --- Lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.queue = queueing.WorkQueue(
            self._work, gate=self.elector.wait_leading if self.elector is not None else None,
            expected=REPORTED_FAILURES)
        self._resync_task = asyncio.get_running_loop().create_task(self._resync())
        if self.elector is not None:
            self.elector.start()

    def watch_pods(self, paths: Sequence[str]) -> None:
        """Watch proc pods under ``paths`` with :mod:`.podwatch` (instead of kopf's pod
        handler), feeding :meth:`pod_event`; and, over the same namespaces, each mesh's Service
        and Role (:mod:`.childwatch`), feeding :meth:`child_event`, and the ResourceQuotas
        (:mod:`.quotawatch`), feeding :meth:`quota_event`."""
        for path in paths:
            watch = podwatch.PodWatch(self.client, path, self.pod_event, self.pods_listed)
            watch.start()
            self._pod_watches.append(watch)
            self._child_watches += childwatch.start(self.client, listwatch.namespace_of(path),
                                                    self.child_event, self.children_listed)
            self._quota_watches.append(quotawatch.start(self.client, listwatch.namespace_of(path),
                                                        self.quota_event))

    def watch_meshes(self, paths: Sequence[str]) -> None:
        """Watch ProcMeshes with :mod:`.meshwatch` (instead of kopf's mesh handler) over the
        namespaces of the pod watch ``paths``, feeding :meth:`mesh_event` and
        :meth:`meshes_listed`."""
        for path in paths:
            watch = meshwatch.MeshWatch(self.client, listwatch.namespace_of(path),
                                        self.mesh_event, self.meshes_listed)
            watch.start()
            self._mesh_watches.append(watch)

    def watch_workloads(self, paths: Sequence[str]) -> None:
        """Watch the meshes' Kueue Workloads with :mod:`.workloadwatch` (instead of kopf's
        handler) over the namespaces of the pod watch ``paths``, feeding
        :meth:`workload_event`."""
        for path in paths:
            self._workload_watches.append(workloadwatch.start(
                self.client, listwatch.namespace_of(path), self.workload_event))

    async def stop(self) -> None:
        if self.elector is not None:  # a stopping replica takes no Lease up any more
            self.elector.retire()
        for watch in [*self._mesh_watches, *self._workload_watches, *self._pod_watches,
                      *self._child_watches, *self._quota_watches]:
            await watch.stop()
        if self._resync_task is not None:
            self._resync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resync_task
        if self.queue is not None:
            await self.queue.close()
        if self.elector is not None:  # after the last reconcile: a successor starts clean
            await self.elector.stop()
        await self.client.close()

    async def _resync(self) -> None:
        """Level-based safety net: relist the pods (repairing any drift of the store from what
        the API holds), then reconcile every known mesh, events or not."""
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            await self.resync_once()

    async def resync_once(self) -> None:
        """One pass of the safety net: the pod cache is relisted (see below) and every known
        mesh is enqueued; a mesh whose children (Role, Service, PodGroup) were last checked
        CHILD_CHECK_RESYNCS passes ago has them checked again and is read fresh (GET) at its
        next reconcile. Those are three requests per mesh: at every pass, a quarter of all the
        operator's requests with 100 meshes (6,400 pods), for objects nothing else changes.
        Counted per mesh from the first pass that knew it (its first reconcile checked them),
        so a wave of new meshes is not checked again all at once while it starts."""
        for key in list(self._phases):
            if self._resyncs - self._checked_at.setdefault(key, self._resyncs) >= \
                    CHILD_CHECK_RESYNCS:
                self._checked_at[key] = self._resyncs
                for kind in CHILD_KINDS:
                    self._ensured.pop((key, kind), None)
                self.bodies.read_fresh_next(key)
        # Fed by our own watch (podwatch.py: gapless from its list, listed again after any
        # failure), the pod cache is relisted at every CHILD_CHECK_RESYNCS-th pass only: at
        # 6,400 pods each relist decoded every pod whole, a fifth of the operator's CPU.
        relist = not self._pod_watches or self._resyncs % CHILD_CHECK_RESYNCS == 0
        self._resyncs += 1
        try:
            if relist:
                await self.relist()
        except Exception as e:  # noqa: BLE001 - the safety net itself must never stop
            logger.warning("relist of proc pods failed (the next resync retries): %s", e)
        # Only once every known mesh's pods are in the store: a mesh not listed yet may have one
        # on a deleted node (its gone entry is what makes the plan replace that pod).
        known = set(self._phases) | set(self.queue.keys() if self.queue is not None else ())
        if any(loss.status == losses.GONE for loss in self._losses.values()) and \
                known <= set(self.store.primed()):
            self._losses = losses.without_empty_gone(self._losses, self.store.nodes_in_use())
        for key in list(self._phases):
            self.enqueue(key)

    async def relist(self) -> set[Key]:
        """One list per namespace with primed meshes (not per mesh, not per event), applied with
        :meth:`stores.PodStore.repair`; returns the meshes whose pods it changed."""
        changed: set[Key] = set()
        for namespace in sorted({ns for ns, _ in self.store.primed()}):
            # Paged and projected page by page: every proc pod of the namespace, thousands,
            # would otherwise be parsed whole at once at every resync (the peak of the RSS).
            listed = await self.client.list_paged(kubeclient.pods_path(namespace),
                                                  label_selector=contract.MESH_LABEL,
                                                  transform=_slim_in(namespace))
            items = listed.get("items") or []
            list_rv = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
            changed |= self.store.repair(namespace, items,
                                         int(list_rv) if list_rv.isdigit() else 0)
        for key in changed:
            logger.info("relist repaired the pod cache of %s/%s", *key)
            self.bodies.read_fresh_next(key)  # pods gone unseen: collected with their mesh?
        return changed

    def pods_listed(self, namespace: str | None, items: Sequence[Mapping[str, Any]],
                    version: str) -> None:
        """The pod watch listed again (after 410 Gone or a failure; :mod:`.podwatch`): the
        store is repaired with that list at once, and the meshes it changed are reconciled. A
        pod deleted while no watch ran brought no DELETED event: it stayed in the store until
        the resync's own relist (every CHILD_CHECK_RESYNCS passes, about 5 min), the mesh
        reporting that proc ready and never recreating it meanwhile."""
        by_namespace: dict[str, list[Mapping[str, Any]]] = {}
        for item in items:
            ns = str((item.get("metadata") or {}).get("namespace") or namespace or "")
            by_namespace.setdefault(ns, []).append(item)
        list_rv = int(version) if version.isdigit() else 0
        primed = {ns for ns, _ in self.store.primed()}
        for ns in sorted(primed if namespace is None else primed & {namespace}):
            changed = self.store.repair(ns, by_namespace.get(ns, []), list_rv)
            for key in changed:
                logger.info("the pod watch's list repaired the pod cache of %s/%s", *key)
                self.bodies.read_fresh_next(key)  # pods gone unseen: collected with their mesh?
                self.enqueue(key)

    def meshes_listed(self, namespace: str | None, items: Sequence[Mapping[str, Any]],
                      version: str) -> None:
        """The mesh watch listed again (:mod:`.meshwatch`): a mesh reconciled here and absent
        from the list was deleted while no watch ran, with no DELETED event (its CRD deleted
        and created again, say): read fresh and reconciled, which forgets it."""
        listed = {(str((item.get("metadata") or {}).get("namespace") or namespace or ""),
                   str((item.get("metadata") or {}).get("name"))) for item in items}
        for key in list(self._phases):
            if namespace in (None, key[0]) and key not in listed:
                self.bodies.read_fresh_next(key)
                self.enqueue(key)

    def known_meshes(self) -> int:
        """How many meshes this operator has reconciled (for the liveness probe's payload)."""
        return len(self._phases)

    def enqueue(self, key: Key, delay: float = 0.0) -> None:
        if self.queue is not None:
            self.queue.enqueue(key, delay)

    # --- Triggers (from handlers.py) -----------------------------------------------------------

    def mesh_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace", "default")), str(meta.get("name")))
        for dependent in self._colocated_by.get(key, ()):
            self.enqueue(dependent)  # e.g. a mesh that waited for this one to exist
        if event_type == "DELETED":
            self._forget(key, str(meta.get("uid") or "") or None)
            return
        self.bodies.remember(key, body)
        if meta.get("resourceVersion") and \
                meta.get("resourceVersion") == self._last_status_rv.get(key):
            return  # the echo of our own status write
        self.enqueue(key)

    def pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        news = self.store.deletion_is_news(event_type, body)
        key = self.store.observe(event_type, body)
        if key is None:
            return
        if news:
            # Not a delete of ours: maybe garbage collection's, the mesh deleted before its own
            # watch event arrived. Read fresh, lest its procs be created again from the body
            # held (owned by a mesh that is gone, and collected again).
            self.bodies.read_fresh_next(key)
        self.enqueue(key)
        if event_type == "DELETED" or planning.is_failed(body):
            # Room may have freed for a mesh held at the gang gate, or waiting to be placed.
            for waiting in (self._gated | self._waiting_for_room) - {key}:
                self.enqueue(waiting)
        for dependent in self._colocated_by.get(key, ()):
            self.enqueue(dependent)

    def child_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A mesh's Service or Role (:mod:`.childwatch`): when one this incarnation was
        ensured with is deleted, the mesh is reconciled, which creates it again."""
        if event_type == "DELETED":
            found = childwatch.owner(body)
            if found is not None:
                self._child_gone(found[0], kind, found[1])

    def children_listed(self, kind: str, namespace: str | None,
                        items: Sequence[Mapping[str, Any]], version: str) -> None:
        """The child watch listed again: an ensured child missing from the list was deleted
        while no watch ran. (One created after the list's snapshot is only read again.)"""
        present = {found for found in map(childwatch.owner, items) if found is not None}
        for (key, ensured_kind), uid in list(self._ensured.items()):
            if ensured_kind == kind and namespace in (None, key[0]) and (key, uid) not in present:
                self._child_gone(key, kind, uid)

    def _child_gone(self, key: Key, kind: str, uid: str) -> None:
        """A child of mesh incarnation ``uid`` was deleted. Also while a reconcile is checking
        it (its _ensured entry popped): that check may have read it before the deletion. The
        mesh is read fresh (a GET) before it is reconciled: garbage collection deletes the
        children of a deleted mesh before its own watch event may arrive, and a reconcile from
        the body held would create them again for a mesh that is gone."""
        if self._ensured.get((key, kind)) == uid:
            del self._ensured[(key, kind)]
        elif key not in self._phases:
            return  # no mesh this operator reconciles
        self._deleted_children[key, kind] = (uid, next(self._child_deletions))
        self.bodies.read_fresh_next(key)
        self.enqueue(key)

    def quota_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A ResourceQuota was listed, changed or deleted (:mod:`.quotawatch`): room may have
        come for the meshes of its namespace that wait for quota."""
        namespace = (body.get("metadata") or {}).get("namespace")
        for key in [k for k in self._waiting_for_quota if k[0] == namespace]:
            self.enqueue(key)

    def workload_event(self, body: Mapping[str, Any]) -> None:
        """A mesh's Kueue Workload changed (admitted, evicted): look at the mesh again."""
        meta = body.get("metadata") or {}
        mesh = (meta.get("labels") or {}).get(contract.MESH_LABEL)
        if mesh:
            self.enqueue((str(meta.get("namespace", "default")), str(mesh)))

    def node_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Track lost nodes; when a node's loss changes (lost, tainted, untainted, back), look
        again at the meshes with pods there."""
        name = str((body.get("metadata") or {}).get("name"))
        before = self._losses.get(name)
        was_outage = losses.outage(self._losses, len(self._ready_nodes))
        if event_type == "DELETED":
            after: losses.NodeLoss | None = losses.gone(name, time.time())
        else:
            after = losses.carried(before, losses.loss_of(body, time.time()))
        if after is None:
            self._losses.pop(name, None)
        else:
            self._losses[name] = after
        if event_type != "DELETED" and losses.is_ready(body):
            self._ready_nodes.add(name)
        else:
            self._ready_nodes.discard(name)
        if name in self._ready_nodes and not (body.get("spec") or {}).get("unschedulable"):
            taints = fitting.blocking_taints(body)
            was = self._placeable_nodes.get(name)
            if was is None or not was <= taints:  # joined, back, uncordoned or untainted:
                for waiting in self._waiting_for_room:
                    self.enqueue(waiting)  # it may fit them now
            self._placeable_nodes[name] = taints
        else:
            self._placeable_nodes.pop(name, None)
        is_outage = losses.outage(self._losses, len(self._ready_nodes))
        if was_outage != is_outage:
            # kopf's first listing (event type None) hands the nodes over one by one: a lost node
            # listed before the Ready ones is no outage, and must not restart lost nodes' clocks.
            if is_outage and event_type is not None:
                logger.warning("every node is NotReady or unreachable: a control-plane outage, "
                               "not node loss; no proc counts as failed until a node is back")
            elif event_type is not None:
                self._outage_ended = time.time()
                logger.info("node %s is Ready: the outage is over; lost nodes' tolerations "
                            "start now", name)
            for lost in list(self._losses):
                for key in self.store.meshes_on_node(lost):
                    self.enqueue(key)
        if before != after:
            if after is None:
                logger.info("node %s: Ready", name)
            else:
                logger.info("node %s: %s, %s", name, after.status,
                            f"tainted {after.taint}" if after.taint else
                            "not tainted (evictions held)" if after.held else "gone")
            for key in self.store.meshes_on_node(name):
                self.enqueue(key)

    def _judged_losses(self) -> dict[str, losses.NodeLoss]:
        """The lost nodes as planning counts them (:func:`losses.judged`)."""
        return losses.judged(self._losses, resumed=self._outage_ended,
                             during_outage=losses.outage(self._losses, len(self._ready_nodes)))

    def _forget(self, key: Key, uid: str | None = None) -> None:
        """The mesh (incarnation ``uid``, if known) is gone: drop everything kept about it
        (nothing per mesh outlives it but its uid, bounded, in :mod:`.watched`)."""
        self.store.unprime(key)
        for kind in CHILD_KINDS:
            self._ensured.pop((key, kind), None)
            self._deleted_children.pop((key, kind), None)
        if not self._colocated_by.get(key):
            self._colocated_by.pop(key, None)
        self._phases.pop(key, None)
        self.bodies.forget(key, uid)
        self._last_status_rv.pop(key, None)
        self._throttle.forget(key)
        self._tokens.forget(key)
        self._gated.discard(key)
        self._waiting_for_room.discard(key)
        self._waiting_for_quota.discard(key)
        self._stalls.pop(key, None)
        self._groups_read.pop(key, None)
        self._released.discard(key)
        self._leases.forget(key)
        self._create_order.pop(key, None)
        self._checked_at.pop(key, None)
        self._entries.pop(key, None)
        for partner in list(self._colocated_by):
            deps = self._colocated_by[partner]
            deps.discard(key)  # (meshes colocated with this one keep their entry: they wait)
            if not deps and partner not in self._phases:  # a partner deleted before it
                del self._colocated_by[partner]
        if self.queue is not None:
            self.queue.discard(key)
        self._publish_phases()

    def _publish_phases(self) -> None:
        counts: dict[str, int] = {}
        for phase in self._phases.values():
            counts[phase] = counts.get(phase, 0) + 1
        metrics.set_phases(counts, (statuses.PHASE_PROGRESSING, statuses.PHASE_READY,
                                    statuses.PHASE_DEGRADED, statuses.PHASE_FAILED,
                                    statuses.PHASE_WAITING, statuses.PHASE_SUSPENDED))

    # --- The reconcile -------------------------------------------------------------------------

    async def _work(self, key: Hashable) -> float | None:
        assert isinstance(key, tuple)
        started = time.monotonic()
        try:
            return await self.reconcile(key)
        except Exception:
            metrics.RECONCILE_ERRORS.inc()
            raise
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)

    async def reconcile(self, key: Key) -> float | None:
        """Reconcile one mesh; returns when to look again (seconds), or None."""
        try:
            return await self._reconcile(key)
        except Superseded:  # the mesh changed under this reconcile: again, from its newest body
            return CONFLICT_RETRY_SECONDS

    async def _reconcile(self, key: Key) -> float | None:
        namespace, name = key
        body = await self._mesh_body(key, reconciling=True)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            # Garbage collection removes the children.
            self._forget(key, None if body is None else str(body["metadata"].get("uid") or ""))
            return None
        mesh = specs.parse(body)
        lease_left = self._lease_left(mesh)
        if lease_left is not None and lease_left <= 0:
            await self._expire(mesh, body)
            return None
        previous = body.get("status") or {}
        if mesh.colocate_with:
            self._colocated_by.setdefault((namespace, mesh.colocate_with), set()).add(key)
        await self.store.prime(key, lambda: self._list_pods(namespace, name))
        pods_before = self.store.pods_by_rank(key, mesh.uid)
        plan: planning.Plan | None = None
        created: list[str] = []
        error: str | None = None
        failure: BaseException | None = None
        create_refusal: create_refusals.CreateRefusal | None = None
        view: claiming.ClaimView | None = None
        hold: ganging.Hold | None = None
        queue = workloads.queue_name(body)
        admission: workloads.Admission | None = None
        # As the last status said, unless asked again below (secret_probes.py).
        missing_secret = secret_probes.reported(mesh, previous)
        try:
            mode = ganging.mode_for(await self._resolve_gang_mode(), mesh)
            mesh = await self._ensure_secret(mesh, str(
                (body.get("metadata") or {}).get("resourceVersion") or "") or None)
            await self._ensure_access_role(mesh)
            await self._ensure_service(mesh)
            if queue is not None:
                mesh, admission = await self._admit(mesh, queue, previous)
            if mode == ganging.POD_GROUP and not mesh.suspend:
                await self._ensure_pod_group(mesh)
            plan, created, view = await self._reconcile_pods(mesh, previous)
            # Pods created for a mesh that ran before (a restart, a replaced proc): its
            # children may have been deleted since they were last checked, and what a new pod
            # needs, the token Secret above all, is looked at now rather than at the periodic
            # check (_ensure_child), a few requests per replacement, none per healthy mesh.
            replaced = bool(created) and (bool(pods_before) or plan.restarts > 0)
            if replaced:
                await self._recheck_children(mesh, mode)
            if not mesh.suspend and secret_probes.due(mesh, previous, replaced=replaced):
                missing_secret = await self._probe_secret(mesh, missing_secret)
            hold = await self._gang_hold(mesh, mode)
        except create_refusals.CreatesFailed as e:
            plan, created, view, failure = e.plan, e.created, e.view, e
            create_refusal = create_refusals.classify(e.pod, e.error, mesh.size)
            if create_refusal is None:
                error = str(e.error)
        except REPORTED_FAILURES as e:
            error, failure = str(e), e
        if plan is not None and plan.refusal is not None and plan.refusal.reason in ROOM_WAITS:
            self._waiting_for_room.add(key)
        elif plan is not None:
            self._waiting_for_room.discard(key)
        if create_refusal is not None and create_refusal.quota:  # a wait, or a quota to raise
            self._waiting_for_quota.add(key)
        else:
            self._waiting_for_quota.discard(key)
        pods = self.store.pods_by_rank(key, mesh.uid)
        status = statuses.compute_status(
            mesh, previous, pods, plan, error, hold=hold,
            claimed_gpus=view.gpus_by_rank(mesh) if view is not None else None,
            memo=self._entries.setdefault(key, proc_entries.EntryMemo()),
            missing_secret=missing_secret, unseen_after=self.settings.unseen_pod_seconds,
            create_refusal=create_refusal,
            claims_seen=view.claims if view is not None else None)
        if queue is not None and admission is not None:
            status = workloads.overlay(status, previous, admission, queue, mesh.generation,
                                       statuses.now_rfc3339(),
                                       suspended=bool((body.get("spec") or {}).get("suspend")))
        changed = statuses.differs(previous, status)
        deferred = self._throttle.wait(key, previous, status) if changed else 0.0
        if changed and deferred <= 0:
            try:
                await self._write_status(key, mesh.uid, status, body)
            except kubeclient.ApiError as e:
                if e.not_found:
                    self._forget(key, mesh.uid)
                    return None
                raise
        if admission is not None and failure is None:
            await admitting.report_readiness(self.client, mesh, admission, int(status.get("readyProcs") or 0))
        for type_, reason, message in eventing.transitions(previous, status, plan, created,
                                                           pods_before, name):
            await self.events.post(body, type_, reason, message)
        if plan is not None and plan.restarted:
            metrics.RESTARTS.labels(policy=mesh.restart_policy).inc(len(plan.restarted))
        if self.bodies.gone(mesh.uid):
            # Deleted while this reconcile awaited the API: its DELETED event has forgotten it,
            # and recording its phase (or keeping the entries memo made again above) would
            # keep it with nothing left to reconcile it away.
            self._entries.pop(key, None)
            return None
        if self._phases.get(key) != status["phase"]:  # the gauges walk every mesh: on changes only
            self._phases[key] = str(status["phase"])
            self._publish_phases()
        if failure is not None:
            raise failure
        again = [WAITING_RECHECK_SECONDS] if plan is not None and plan.waiting is not None else []
        if deferred > 0:
            again.append(deferred)  # the progress held back is written then (coalescing.py)
        if key in self._gated:
            again.append(WAITING_RECHECK_SECONDS)  # room may free outside our pods' events
        if plan is not None and plan.recheck is not None:
            again.append(max(plan.recheck, 0.1))  # when a lost node's toleration runs out
        if lease_left is not None:
            again.append(max(lease_left, 0.1))  # when the lease lapses unless renewed
        unseen = statuses.unseen_recheck(pods, time.time(), self.settings.unseen_pod_seconds) \
            if status["readyProcs"] < status["desiredProcs"] else None
        if unseen is not None:
            again.append(max(unseen, 0.1))  # when a pod no scheduler looked at is reported
        return min(again) if again else None

    async def _mesh_body(self, key: Key, *, reconciling: bool = False) -> dict[str, Any] | None:
        """The mesh as last watched or written (:mod:`.watched`), else read with a GET (None:
        it does not exist); read with a GET too when its own reconcile (``reconciling``) was
        asked to read it fresh (:meth:`watched.MeshBodies.read_fresh_next`)."""
        fresh = reconciling and self.bodies.take_fresh_next(key)
        held = self.bodies.get(key)
        if held is not None and not fresh:
            return held
        body = await self.client.get_or_none(kubeclient.mesh_path(*key))
        if body is not None:
            self.bodies.remember(key, body)
        elif held is not None and self.bodies.get(key) == held:
            # Gone (garbage collection told first): the body held is of the deleted mesh, not
            # of one created again meanwhile (that one's event would have replaced it).
            self.bodies.forget(key, watched.uid_of(held))
        return body

    async def _write_status(self, key: Key, uid: str, status: Mapping[str, Any],
                            read: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Merge-patch ``status`` onto the mesh incarnation ``uid``, on the version whose status
        it was computed from (a precondition: a merge patch names a path, not an object); the
        mesh as written. Without the precondition, a reconcile of a mesh deleted and created
        again under its name while it awaited the API wrote the earlier mesh's status onto the
        new one: its token Secret's name, which garbage collection then deletes under the new
        mesh's pods, and its restarts. Refused because the mesh changed meanwhile, the write is
        made again if only its spec or metadata changed (a lease renewal, Kueue, an edit), so
        that nothing the reconcile did (a restart counted, its events) is lost; if its status
        changed too (our own earlier write, its response lost) or another incarnation holds
        the name, it raises :class:`Superseded`, and the mesh is reconciled again from its
        newest body. ``read``: the body this reconcile read, if any; a 404 raises."""
        held = self.bodies.get(key)
        if held is None or watched.uid_of(held) != uid:
            held = dict(read) if read is not None and watched.uid_of(read) == uid else None
        for attempt in range(2):
            if held is None or not _resource_version(held):
                held = await self.client.get_or_none(kubeclient.mesh_path(*key))
                if held is None:
                    raise kubeclient.ApiError(404, "NotFound", kubeclient.mesh_path(*key))
                if watched.uid_of(held) != uid:
                    raise self._superseded(key)
                self.bodies.remember(key, held)
            try:
                written = await self.client.merge_patch(
                    kubeclient.mesh_path(*key, status=True),
                    {"metadata": {"resourceVersion": _resource_version(held)},
                     "status": status})
            except kubeclient.ApiError as e:
                if not e.conflict:
                    self.bodies.expire(key)  # a 5xx may have been applied: read it next time
                    raise
                if attempt:
                    raise self._superseded(key) from e
                fresh = await self.client.get_or_none(kubeclient.mesh_path(*key))
                if fresh is None:
                    raise kubeclient.ApiError(404, "NotFound", kubeclient.mesh_path(*key)) from e
                if watched.uid_of(fresh) != uid or fresh.get("status") != held.get("status"):
                    raise self._superseded(key) from e
                held = fresh  # only the spec or metadata changed: the same status, newer version
                continue
            except BaseException:
                # A timeout or a broken connection: the write may have been applied, its
                # response lost. The body held would then be older than the mesh, and the
                # next reconcile would plan from it (a restart counted again, or undone).
                self.bodies.expire(key)
                raise
            self._wrote(key, written)
            return written
        raise AssertionError("not reached: the second attempt returns or raises")

    def _superseded(self, key: Key) -> Superseded:
        """The status this reconcile computed is not to be written: read the mesh afresh."""
        self.bodies.expire(key)
        return Superseded(f"ProcMesh {key[0]}/{key[1]} changed while it was reconciled")

    def _wrote(self, key: Key, written: Mapping[str, Any]) -> None:
        """A status write's response: the mesh's newest body, and the echo to ignore."""
        self._last_status_rv[key] = str((written.get("metadata") or {}).get("resourceVersion"))
        self._throttle.wrote(key)
        self.bodies.remember(key, written)

    def _lease_left(self, mesh: specs.MeshSpec) -> float | None:
        """Seconds the mesh's lease has left (None: no lease; see :mod:`.leases`)."""
        if mesh.lease_seconds is None:
            self._leases.forget((mesh.namespace, mesh.name))
            return None
        return self._leases.remaining((mesh.namespace, mesh.name), mesh.uid, mesh.lease_renewal,
                                      mesh.lease_seconds, time.monotonic())

    async def _expire(self, mesh: specs.MeshSpec, body: Mapping[str, Any]) -> None:
        """The holder stopped renewing: delete the mesh (this incarnation only); garbage
        collection removes its pods, and with them their GPU budget."""
        await self.events.post(
            body, eventing.WARNING, contract.LEASE_EXPIRED,
            f"deleted: its lease was not renewed for {mesh.lease_seconds} s (spec.lease."
            f"durationSeconds); the program that created it has stopped")
        await self.client.delete(kubeclient.mesh_path(mesh.namespace, mesh.name), uid=mesh.uid)
        self._forget((mesh.namespace, mesh.name), mesh.uid)

    async def _list_pods(self, namespace: str, mesh: str) -> list[dict[str, Any]]:
        listed = await self.client.list_paged(kubeclient.pods_path(namespace),
                                              label_selector=contract.mesh_label_selector(mesh),
                                              transform=_slim_in(namespace))
        return list(listed.get("items") or [])

    # --- secret -> service -> pods -------------------------------------------------------------

    def _recently_ensured(self, mesh: specs.MeshSpec, kind: str) -> bool:
        """Checked for this incarnation since its last check by the resync (resync_once)."""
        return self._ensured.get(((mesh.namespace, mesh.name), kind)) == mesh.uid

    async def _ensure_child(self, mesh: specs.MeshSpec, kind: str, path: str,
                            render: Any) -> None:
        """Create the child if absent; accept it if this mesh owns it; never update it (the
        token must not rotate). A mesh with no pods yet is most likely new: its child is
        created first and read only on a conflict (one request instead of two); otherwise it
        is read first, as at a resync, where it nearly always exists, and a child found
        missing then was deleted under the mesh: created again, with a Warning event."""
        if self._recently_ensured(mesh, kind):
            return
        key = (mesh.namespace, mesh.name)
        deletion = self._deleted_children.get((key, kind))
        deleted = deletion is not None and deletion[0] == mesh.uid
        fresh = not deleted and not self.store.pods_by_rank(key, mesh.uid)
        existing = None if fresh else await self.client.get_or_none(path)
        if existing is None:
            try:
                existing = await self.client.create(path.rsplit("/", 1)[0], render())
            except kubeclient.ApiError as e:
                if not e.conflict:
                    raise
                existing = await self.client.get(path)
            else:
                if not fresh:
                    await self.events.post(
                        _event_subject(mesh), eventing.WARNING, CHILD_RECREATED,
                        f"{kind} {path.rsplit('/', 1)[1]} of this mesh was gone (deleted); "
                        f"created it again")
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == mesh.uid for o in owners):
            raise ChildConflict(
                f"{kind} {path.rsplit('/', 1)[1]} exists and is not owned by this ProcMesh: if "
                f"an earlier mesh of this name was just deleted, this clears when garbage "
                f"collection removes it; otherwise delete it or rename the mesh")
        if self._deleted_children.get((key, kind)) != deletion:
            self.enqueue(key)  # deleted while this looked (what it read may predate that)
            return
        self._ensured[key, kind] = mesh.uid
        self._deleted_children.pop((key, kind), None)

    async def _recheck_children(self, mesh: specs.MeshSpec, mode: str) -> None:
        """Check the Role, Service and PodGroup again now, whenever they were last checked."""
        key = (mesh.namespace, mesh.name)
        for kind in CHILD_KINDS:
            self._ensured.pop((key, kind), None)
        await self._ensure_access_role(mesh)
        await self._ensure_service(mesh)
        if mode == ganging.POD_GROUP and not mesh.suspend:
            await self._ensure_pod_group(mesh)

    async def _probe_secret(self, mesh: specs.MeshSpec, reported: str | None) -> str | None:
        """The token Secret's name if it is gone (:mod:`.secret_probes`), None if it is there;
        ``reported`` (what the last status said) when the API server would not tell."""
        found = await secret_probes.exists(self.client, mesh)
        if found is None:
            return reported
        if not found and reported is None:
            logger.warning("token Secret %s of %s/%s is gone while the mesh has procs",
                           mesh.token_secret, mesh.namespace, mesh.name)
        return None if found else mesh.token_secret

    async def _ensure_secret(self, mesh: specs.MeshSpec, resource_version: str | None
                             ) -> specs.MeshSpec:
        """The token Secret, created and recorded in status by :mod:`.token_secrets` (never
        read: the operator holds no ``get secrets``); the mesh with its recorded name."""
        key = (mesh.namespace, mesh.name)
        try:
            ensured = await self._tokens.ensure(
                self.client, mesh, bool(self.store.pods_by_rank(key, mesh.uid)), resource_version)
        except BaseException:
            # Refused (a 409: read the mesh fresh next time), or its status write's answer
            # lost: the name may be recorded, and the body held would not show it.
            self.bodies.expire(key)
            raise
        if ensured.written is not None:
            self._wrote(key, ensured.written)
        return ensured.mesh

    async def _ensure_access_role(self, mesh: specs.MeshSpec) -> None:
        """The mesh's access Role (rendering.render_access_role), created once and never
        updated: the operator may create Roles but never bind or change them."""
        await self._ensure_child(
            mesh, "Role", kubeclient.roles_path(mesh.namespace, contract.access_role_name(mesh.name)),
            lambda: rendering.render_access_role(mesh))

    async def _ensure_service(self, mesh: specs.MeshSpec) -> None:
        await self._ensure_child(
            mesh, "Service", kubeclient.core_path(mesh.namespace, "services",
                                                  contract.service_name(mesh.name)),
            lambda: rendering.render_service(mesh))

    async def _ensure_pod_group(self, mesh: specs.MeshSpec) -> None:
        """The mesh's PodGroup (ganging.render_pod_group), created before its pods and never
        updated (a PodGroup's spec is immutable, like the mesh's shape)."""
        await self._ensure_child(
            mesh, "PodGroup", ganging.pod_groups_path(mesh.namespace, ganging.pod_group_name(mesh)),
            lambda: ganging.render_pod_group(mesh))

    # --- Kueue (admitting.py) ------------------------------------------------------------------

    async def _admit(self, mesh: specs.MeshSpec, queue: str, previous: Mapping[str, Any]
                     ) -> tuple[specs.MeshSpec, workloads.Admission]:
        """The mesh as it is to be planned: suspended unless its Workload is admitted. On an
        eviction, the status says so before any proc is stopped, so that a client whose call
        fails on a stopped proc reads why."""
        key = (mesh.namespace, mesh.name)
        pods = self.store.pods_by_rank(key, mesh.uid)
        admission = await admitting.admission(self.client, mesh, queue, pods, self.settings)
        if admission.state == workloads.STATE_ADMITTED:
            if admission.flavors:  # the procs go where their quota is
                mesh = dataclasses.replace(
                    mesh, template=workloads.with_flavors(mesh.template, admission.flavors))
            return mesh, admission
        # Not admitted with procs running: an eviction, seen as such (Evicted, quota still held)
        # or already as a queued workload (Kueue released the quota, or this operator restarted
        # after releasing it): the status says why before any of them is stopped.
        if admission.state != workloads.STATE_ADMITTED and pods and previous and not mesh.suspend:
            stopping = workloads.overlay(previous, previous, admission, queue, mesh.generation,
                                         statuses.now_rfc3339())
            if statuses.differs(previous, stopping):
                await self._write_status(key, mesh.uid, stopping)
        return dataclasses.replace(mesh, suspend=True), admission

    # --- The gang (ganging.py) -----------------------------------------------------------------

    async def _resolve_gang_mode(self) -> str:
        """``--gang``, with ``auto`` decided once per process by API discovery: the PodGroup
        API when ``scheduling.k8s.io/v1alpha2`` serves podgroups, else our gate."""
        if self._gang_mode is None:
            discovery = None
            if self.settings.gang == ganging.AUTO:
                discovery = await self.client.get_or_none(ganging.POD_GROUP_API)
            self._gang_mode = ganging.resolve_mode(self.settings.gang, discovery)
            logger.info("gang placement: %s", self._gang_mode)
        return self._gang_mode

    async def _gang_hold(self, mesh: specs.MeshSpec, mode: str) -> ganging.Hold | None:
        """Why the mesh's gang is not placed (None: nothing holds it). In gate mode this is
        where the gate is lifted: once every pod exists, under the placement lock, on a fresh
        list of nodes and pods, and only if :func:`fitting.fit` places the whole mesh."""
        key = (mesh.namespace, mesh.name)
        pods = self.store.pods_by_rank(key, mesh.uid)
        if mesh.suspend or mode == ganging.OFF:
            self._gated.discard(key)
            return None
        if mode == ganging.POD_GROUP:
            if len(pods) >= mesh.size and all(ganging.is_bound(p) for p in pods.values()):
                self._gated.discard(key)
                self._groups_read.pop(key, None)
                return None
            # Looked at again every few seconds until bound: the scheduler writes the PodGroup's
            # condition with no event of ours to follow (we do not watch PodGroups).
            self._gated.add(key)
            if len(pods) < mesh.size:
                # The scheduler does not look at a gang before all its pods exist (its
                # PreEnqueue waits for minCount): nothing to read yet, one GET per reconcile saved.
                return None
            ordered = [pods[r] for r in sorted(pods)]
            if ganging.scheduler_hold(None, ordered) is None:
                # No pod rejected yet: the scheduler marks every pod of a gang PodScheduled=False
                # in the cycle that finds the gang unschedulable, before the PodGroup itself
                # (k8s.io/kubernetes pkg/scheduler/schedule_one_podgroup.go), and each pod's
                # condition comes with its event: nothing to read until then.
                return None
            group, explanation = await self._pod_group(mesh, ordered)
            return ganging.scheduler_hold(group, ordered, explanation)
        stall = ganging.stalled(mesh, pods, time.time(), self.settings.gang_stall_seconds) \
            if key in self._released else None
        if stall is not None:
            return await self._recreate_stalled(mesh, pods, stall)
        gated = [p for p in pods.values() if ganging.is_gated(p) and not planning.is_terminating(p)]
        if not gated:
            # Released: watched until all are bound (a stall shows only by waiting).
            if all(ganging.is_bound(p) for p in pods.values()):
                self._gated.discard(key)
                self._released.discard(key)
                self._stalls.pop(key, None)
            return None
        self._gated.add(key)
        waiting = ganging.waiting_hold(mesh, pods)
        if waiting is not None:
            return waiting
        _, not_before, stalled_message = self._stalls.get(key, (0, 0.0, ""))
        if time.monotonic() < not_before:
            return ganging.Hold(ganging.GANG_STALLED, stalled_message)
        async with self._placement_lock:
            verdict = await self._fit(gated)
            if not verdict.fits:
                return ganging.Hold(ganging.UNSCHEDULABLE, verdict.message)
            released = await asyncio.gather(*(
                self.client.merge_patch(kubeclient.pods_path(mesh.namespace, _ident(p)[0]),
                                        ganging.ungate_patch(p)) for p in gated))
        for pod in released:
            self.store.upsert(pod)
        if len(gated) >= mesh.size:
            self._released.add(key)
        self._gated.discard(key)
        logger.info("released the gang of %s/%s: %d pods", mesh.namespace, mesh.name, len(gated))
        return None

    async def _pod_group(self, mesh: specs.MeshSpec, ordered: list[dict[str, Any]]
                         ) -> tuple[dict[str, Any] | None, str | None]:
        """The mesh's PodGroup for its scheduler verdict and the operator's own fit check of
        its unbound pods (why it does not fit; None if it fits or the check failed), both
        done again only after a pause that doubles from WAITING_RECHECK_SECONDS to
        POD_GROUP_READ_MAX_SECONDS while the gang waits: a gang of thousands of pods is
        reconciled many times while it waits, and the check lists every node and pod."""
        key = (mesh.namespace, mesh.name)
        when, reads, group, explanation = self._groups_read.get(key, (-1e18, 0, None, None))
        pause = min(WAITING_RECHECK_SECONDS * 2 ** max(reads - 1, 0), POD_GROUP_READ_MAX_SECONDS)
        if time.monotonic() - when < pause:
            return group, explanation
        group = await self.client.get_or_none(
            ganging.pod_groups_path(mesh.namespace, ganging.pod_group_name(mesh)))
        unbound = [p for p in ordered if not ganging.is_bound(p) and not planning.is_terminating(p)]
        try:
            verdict: fitting.Fit | None = await self._fit(unbound)
        except (kubeclient.ApiError, kubeclient.Unanswered) as e:  # only an explanation here: never a failure
            logger.info("no fit explanation for %s/%s: %s", mesh.namespace, mesh.name, e)
            verdict = None
        explanation = verdict.message if verdict is not None and not verdict.fits else None
        self._groups_read[key] = (time.monotonic(), reads + 1, group, explanation)
        return group, explanation

    async def _recreate_stalled(self, mesh: specs.MeshSpec, pods: Mapping[int, Mapping[str, Any]],
                                message: str) -> ganging.Hold:
        """Delete every pod of a stalled gang (not a restart: no proc had all its peers), so
        that the plan recreates them behind the gate; the next release backs off."""
        key = (mesh.namespace, mesh.name)
        stalls = self._stalls.get(key, (0, 0.0, ""))[0] + 1
        delay = min(self.settings.gang_stall_seconds * 2 ** (stalls - 1), 600.0)
        message = (f"{message}; stall {stalls}: released again after a {delay:.0f} s back-off "
                   f"if it fits")
        self._stalls[key] = (stalls, time.monotonic() + delay, message)
        self._gated.add(key)
        self._released.discard(key)
        held = self.bodies.get(key) or {}
        last = proc_entries.last_phases(held.get("status"))
        # Recorded as Terminating first: these deletes are ours, not lost procs.
        kept_failed = frozenset(r for r, phase in last.items() if phase == planning.DELETED)
        await self._write_status(key, mesh.uid, statuses.deleting_patch(
            mesh, pods, [_ident(p) for p in pods.values()], deleted=kept_failed))
        for pod in pods.values():
            name, uid = _ident(pod)
            result = await self.client.delete(kubeclient.pods_path(mesh.namespace, name), uid=uid)
            meta = (result or {}).get("metadata") or {}
            if result is not None and meta.get("uid") == uid and meta.get("deletionTimestamp"):
                self.store.upsert(result)  # terminating until its kubelet is done
            else:
                self.store.forget(mesh.namespace, mesh.name, name, uid)
        logger.warning("gang of %s/%s stalled: %s", mesh.namespace, mesh.name, message)
        return ganging.Hold(ganging.GANG_STALLED, message)

    async def _colocation_chain(self, mesh: specs.MeshSpec, partner: specs.MeshSpec) -> list[str]:
        """The meshes named by following colocateWith on from ``partner``, while they exist, up
        to the first name seen before (a cycle, :func:`placing.check_colocation`) or
        MAX_COLOCATION_CHAIN names. Read from the watched bodies (:meth:`_mesh_body`): a cycle
        of meshes each waiting for the next would otherwise wait for ever."""
        chain: list[str] = []
        seen = {mesh.name, partner.name}
        name = partner.colocate_with
        while name is not None and len(chain) < MAX_COLOCATION_CHAIN:
            chain.append(name)
            if name in seen:
                break
            seen.add(name)
            body = await self._mesh_body((mesh.namespace, name))
            name = ((body or {}).get("spec") or {}).get("colocateWith")
        return chain

    async def _fit(self, gang: list[dict[str, Any]]) -> fitting.Fit:
        """:func:`fitting.fit` on a fresh list of the nodes and of every pod in the cluster."""
        listed_nodes = await self.client.list("/api/v1/nodes")
        listed_pods = await self.client.list("/api/v1/pods")
        return fitting.fit(gang, listed_nodes.get("items") or [], listed_pods.get("items") or [])

    async def _reconcile_pods(self, mesh: specs.MeshSpec, previous: Mapping[str, Any]
                              ) -> tuple[planning.Plan, list[str], claiming.ClaimView | None]:
        key = (mesh.namespace, mesh.name)
        restarts = int(previous.get("restarts") or 0)
        partner: specs.MeshSpec | None = None
        partner_pods: dict[int, dict[str, Any]] = {}
        chain: list[str] = []
        if mesh.colocate_with:
            partner_key = (mesh.namespace, mesh.colocate_with)
            partner_body = await self._mesh_body(partner_key)
            if partner_body is not None:
                partner = specs.parse(partner_body)
                await self.store.prime(partner_key, lambda: self._list_pods(*partner_key))
                partner_pods = self.store.pods_by_rank(partner_key, partner.uid)
                chain = await self._colocation_chain(mesh, partner)
        pods = self.store.pods_by_rank(key, mesh.uid)
        # A mesh from before spec.placement: as its pods are, or as recorded once they were.
        rendered = upgrading.as_rendered(mesh, pods, previous.get(upgrading.RENDERED_FIELD))
        if (placement := upgrading.to_record(mesh, rendered,
                                             previous.get(upgrading.RENDERED_FIELD))) is not None:
            await self._write_status(key, mesh.uid, {upgrading.RENDERED_FIELD: placement})
        mesh = rendered
        dra = mesh.gpus.mode == contract.GPU_MODE_DRA and not mesh.suspend
        needs_devices = (mesh.gpus.mode in (contract.GPU_MODE_PINNED, contract.GPU_MODE_DRA)
                         and not mesh.suspend and len(pods) < mesh.size)
        view: claiming.ClaimView | None = None
        if dra:  # the claims exist before any pod that references them
            try:
                view = await claiming.observe(self.client, mesh, self._published)
                if not claiming.settled(mesh, view):
                    await claiming.ensure(self.client, mesh, partner)
                    view = await claiming.observe(self.client, mesh, self._published)
            except claiming.ClaimsNotServed as e:
                return planning.Plan(refusal=placing.Refusal(contract.DRA_NOT_SERVED, str(e))), \
                    [], None
        lock = self._placement_lock if needs_devices else contextlib.nullcontext()
        async with lock:
            nodes: dict[str, placing.NodeInfo] = {}
            others: list[dict[str, Any]] = []
            if needs_devices and dra:
                # A claim is namespaced, so only this namespace's procs can share its devices.
                listed = await self.client.list(kubeclient.pods_path(mesh.namespace),
                                                label_selector=contract.MESH_LABEL)
                others = stores.other_procs(listed.get("items") or [], key, mesh.uid)
            elif needs_devices:
                # Placement is decided on a fresh read: the budget must see every pinned proc.
                listed_nodes = await self.client.list("/api/v1/nodes")
                nodes = {n.name: n for n in (placing.node_info(item) for item in
                                             listed_nodes.get("items") or [])}
                listed = await self.client.list("/api/v1/pods", label_selector=contract.MESH_LABEL)
                others = stores.other_procs(listed.get("items") or [], key, mesh.uid)
            plan = planning.plan(mesh, restarts=restarts, pods=pods, partner=partner,
                                 partner_pods=partner_pods, nodes=nodes, other_pods=others,
                                 settings=self.settings, losses=self._judged_losses(),
                                 now=time.time(),
                                 foreign=self.store.foreign_by_rank(key, mesh.uid),
                                 slot_memory=view.slot_memory() if view is not None else None,
                                 last_phases=proc_entries.last_phases(previous),
                                 colocation_chain=chain,
                                 crash_loops=crashloops.read(previous))
            if plan.deletes:
                # Recorded before the deletes (a restart counted, its pods Terminating, the
                # failed pods it counts marked first): an operator that dies between the two
                # neither loses the restart, nor counts it again, nor takes its own deletes for
                # lost procs when it starts again.
                await self._mark_counted(mesh, plan)
                await self._write_status(key, mesh.uid, statuses.before_deletes(
                    mesh, previous, pods, plan,
                    claimed_gpus=view.gpus_by_rank(mesh) if view is not None else None))
                exit_points.reached(self.settings.test_exit_after, exit_points.RESTART_RECORDED)
            await self._delete_pods(mesh, plan)
            try:
                created = await self._create_pods(mesh, plan)
            except create_refusals.CreatesFailed as e:
                e.plan, e.view = plan, view
                raise
        return plan, created, view

    async def _mark_counted(self, mesh: specs.MeshSpec, plan: planning.Plan) -> None:
        """Mark each failed pod whose failure ``plan`` counts (or the peer that marks a
        RestartMesh attempt) with that count (:func:`planning.counted_as` reads it), on that
        incarnation only."""
        async def mark(name: str, uid: str, restarts: int) -> None:
            try:
                result = await self.client.merge_patch(
                    kubeclient.pods_path(mesh.namespace, name),
                    {"metadata": {"uid": uid, "annotations": {
                        names.RESTART_COUNTED_ANNOTATION: str(restarts)}}})
            except kubeclient.ApiError as e:
                if e.not_found or e.conflict:  # gone, or another incarnation: nothing to count
                    return
                raise
            self.store.upsert(result)

        await asyncio.gather(*(mark(*m) for m in plan.marks))

    async def _delete_pods(self, mesh: specs.MeshSpec, plan: planning.Plan) -> None:
        async def delete(name: str, uid: str) -> None:
            force = name in plan.force  # on a lost node: no kubelet will confirm a graceful one
            result = await self.client.delete(kubeclient.pods_path(mesh.namespace, name), uid=uid,
                                              grace_period_seconds=0 if force else None)
            meta = (result or {}).get("metadata") or {}
            if force:
                logger.info("force-deleted pod %s/%s on a lost node", mesh.namespace, name)
            if result is not None and meta.get("deletionTimestamp") and meta.get("uid") == uid \
                    and not force:
                self.store.upsert(result)  # graceful: terminating until the kubelet is done
            else:
                self.store.forget(mesh.namespace, mesh.name, name, uid)

        # The pods marked with the restart's count go last: an operator that dies in the middle
        # finds one still there, marked, and goes on with that restart (under RestartMesh, the
        # other pods of the attempt too); had it gone first, the unmarked pods left of a
        # RestartMesh attempt would run on beside the fresh ranks created in its place.
        marked = {(name, uid) for name, uid, _ in plan.marks}
        await asyncio.gather(*(delete(n, u) for n, u in plan.deletes if (n, u) not in marked))
        await asyncio.gather(*(delete(n, u) for n, u in plan.deletes if (n, u) in marked))

    async def _create_pods(self, mesh: specs.MeshSpec, plan: planning.Plan) -> list[str]:
        """Create the plan's pods through the controller's create gate (:mod:`.gates`): at most
        ``settings.create_concurrency`` creates in flight across every mesh, earlier meshes first. Each pod is
        rendered only once it has its place, and only its slim projection is kept: rendering
        all of a 4,096-proc mesh's pods up front held every body (and a task each) at once."""
        created: list[str] = []
        todo = iter(sorted(plan.creates.items()))
        path = kubeclient.pods_path(mesh.namespace)
        mode = ganging.mode_for(self._gang_mode or ganging.OFF, mesh)
        order = self._create_order.setdefault((mesh.namespace, mesh.name), next(self._orders))

        failed: list[create_refusals.CreatesFailed] = []
        conflicts: list[create_refusals.CreatesFailed] = []

        async def create(rank: int, placement: rendering.ProcPlacement) -> None:
            pod = ganging.join(rendering.render_pod(mesh, rank, placement, self.settings),
                               mesh, mode)
            name = pod["metadata"]["name"]
            try:
                try:
                    result = await self.client.create(path, pod)
                    created.append(name)
                except kubeclient.ApiError as e:
                    if e.reason != "AlreadyExists":  # a 409 of quota admission is no such pod
                        raise
                    # Created by an earlier run whose watch event has not arrived yet (or
                    # by an earlier mesh of this name: the store waits for it to go), or
                    # someone else's pod under the name, which nothing here would remove.
                    result = await self.client.get(kubeclient.pods_path(mesh.namespace, name))
                    if stores.mesh_key_of(result) != (mesh.namespace, mesh.name):
                        # Only this rank waits for it to go: the others are still created.
                        conflicts.append(create_refusals.CreatesFailed(name, ChildConflict(
                            f"pod {name} exists and is not owned by this ProcMesh (it is no "
                            f"proc pod of a ProcMesh {mesh.name}): delete it or rename the "
                            f"mesh"), created))
                        return
            except (kubeclient.ApiError, kubeclient.Unanswered) as e:
                failed.append(create_refusals.CreatesFailed(name, e, created))
                return
            self.store.upsert(result)

        def stopped() -> bool:
            # The first failure stops the others (create_refusals.py), and so does the mesh
            # deleted meanwhile: garbage collection would only delete what is created for it
            # (a 300-proc mesh deleted at its 62nd pod had 210 more created, and started).
            return bool(failed) or self.bodies.deleting((mesh.namespace, mesh.name), mesh.uid)

        async def worker() -> None:
            for rank, placement in todo:
                if stopped():  # also before queueing at the gate that other meshes share
                    return
                async with self._creates.place(order):
                    if stopped():
                        return
                    await create(rank, placement)

        # Slow start, as a ReplicaSet's: the first pod alone, so that a namespace refusing
        # every pod (Pod Security, a full quota) costs one refused request per retry, not one
        # per worker; then the workers, each stopping at the first failure.
        first = next(todo, None)
        if first is not None:
            async with self._creates.place(order):
                await create(*first)
        if not failed:
            workers = min(self.settings.create_concurrency, len(plan.creates) - 1)
            results = await asyncio.gather(*(worker() for _ in range(workers)),
                                           return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        created.sort(key=lambda n: int(n.rsplit("-", 1)[1]))
        if failed or conflicts:
            raise (failed or conflicts)[0]
        return created


#: Failures of an API request, or a child in the way, that a reconcile says in the mesh's status
#: (Degraded, or the refusal's reason) where it can, then raises for the queue's backoff: the
#: message names the request and the API server's answer, so the operator's log gives each one
#: line, not a traceback at every retry.
REPORTED_FAILURES: tuple[type[Exception], ...] = (
    kubeclient.ApiError, kubeclient.Unanswered, ChildConflict, token_secrets.SecretConflict,
    claiming.ClaimConflict, admitting.KueueNotServed, create_refusals.CreatesFailed)


def _slim_in(namespace: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A listed pod as the store keeps it (:func:`projections.slim_pod`), with its namespace
    (list items may leave it out)."""
    def slim(item: dict[str, Any]) -> dict[str, Any]:
        item.setdefault("metadata", {}).setdefault("namespace", namespace)
        return projections.slim_pod(item)
    return slim


def _event_subject(mesh: specs.MeshSpec) -> dict[str, Any]:
    """What :meth:`eventing.EventPoster.post` needs of a mesh: its identity."""
    return {"metadata": {"name": mesh.name, "namespace": mesh.namespace, "uid": mesh.uid}}


def _resource_version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")


def _ident(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("name")), str(meta.get("uid", ""))

