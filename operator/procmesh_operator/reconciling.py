"""The effectful reconcile of one ProcMesh, in a fixed order: secret -> access role -> service ->
pods -> status.

:class:`Controller` owns the API client, the pod cache (:mod:`.stores`) and the work queue
(:mod:`.queueing`); :mod:`.handlers` feeds it events. One reconcile reads the mesh (fresh),
creates the token Secret (create-only: it never reads one), ensures the mesh's access Role and
the headless Service, plans with :func:`planning.plan`, deletes then creates pods, and writes :func:`statuses.compute_status` through the status subresource
only when it changed. It stops at the first API error, records it in the status, and lets the
queue retry with backoff. Pinned placement runs under one lock, so two meshes cannot claim the
same device budget at once. Node events keep a map of lost nodes (:mod:`.losses`): a node's
transition requeues the meshes with pods on it, and a mesh with procs on a lost node is looked
at again when their toleration runs out. Every ``resync_seconds`` a relist repairs the pod cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Hashable, Mapping
from typing import Any

from mesh_client._src import contract
from procmesh_operator import (
    eventing,
    kubeclient,
    leases,
    losses,
    metrics,
    placing,
    planning,
    queueing,
    rendering,
    specs,
    statuses,
    stores,
)
from procmesh_operator import settings as settings_

logger = logging.getLogger("procmesh_operator.reconcile")

Key = tuple[str, str]
CREATE_CONCURRENCY = 32
WAITING_RECHECK_SECONDS = 5.0


CHILD_KINDS = ("Role", "Service")


class ChildConflict(Exception):
    """A Role or Service with a derived name exists and belongs to someone else."""


class Controller:
    """Everything one operator process knows and does about ProcMeshes."""

    def __init__(self, client: kubeclient.KubeClient, settings: settings_.Settings) -> None:
        self.client = client
        self.settings = settings
        self.store = stores.PodStore()
        self.queue: queueing.WorkQueue | None = None  # made in start(), inside the event loop
        self.events = eventing.EventPoster(client)
        self._ensured: dict[tuple[Key, str], tuple[str, float]] = {}  # -> (mesh uid, when)
        self._placement_lock = asyncio.Lock()
        self._colocated_by: dict[Key, set[Key]] = {}  # partner -> meshes colocated with it
        self._phases: dict[Key, str] = {}
        self._last_status_rv: dict[Key, str] = {}
        self._resync_task: asyncio.Task[None] | None = None
        self._losses: dict[str, losses.NodeLoss] = {}  # lost nodes by name (from the node watch)
        # Meshes whose token Secret this process created (-> mesh uid); never the token itself.
        self._secrets_made: dict[Key, str] = {}
        self._leases = leases.LeaseClock()  # spec.lease: when each renewal was last seen

    # --- Lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.queue = queueing.WorkQueue(self._work)
        self._resync_task = asyncio.get_running_loop().create_task(self._resync())

    async def stop(self) -> None:
        if self._resync_task is not None:
            self._resync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resync_task
        if self.queue is not None:
            await self.queue.close()
        await self.client.close()

    async def _resync(self) -> None:
        """Level-based safety net: relist the pods (repairing any drift of the store from what
        the API holds), then reconcile every known mesh, events or not."""
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            try:
                await self.relist()
            except Exception as e:  # noqa: BLE001 - the safety net itself must never stop
                logger.warning("relist of proc pods failed (the next resync retries): %s", e)
            for key in list(self._phases):
                self.enqueue(key)

    async def relist(self) -> set[Key]:
        """One list per namespace with primed meshes (not per mesh, not per event), applied with
        :meth:`stores.PodStore.repair`; returns the meshes whose pods it changed."""
        changed: set[Key] = set()
        for namespace in sorted({ns for ns, _ in self.store.primed()}):
            listed = await self.client.list(kubeclient.pods_path(namespace),
                                            label_selector=contract.MESH_LABEL)
            items = listed.get("items") or []
            for item in items:
                item.setdefault("metadata", {}).setdefault("namespace", namespace)
            list_rv = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
            changed |= self.store.repair(namespace, items,
                                         int(list_rv) if list_rv.isdigit() else 0)
        for key in changed:
            logger.info("relist repaired the pod cache of %s/%s", *key)
        return changed

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
            self._forget(key)
            return
        if meta.get("resourceVersion") and \
                meta.get("resourceVersion") == self._last_status_rv.get(key):
            return  # the echo of our own status write
        self.enqueue(key)

    def pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        key = self.store.observe(event_type, body)
        if key is None:
            return
        self.enqueue(key)
        for dependent in self._colocated_by.get(key, ()):
            self.enqueue(dependent)

    def node_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Track lost nodes; on a transition, look again at the meshes with pods there."""
        name = str((body.get("metadata") or {}).get("name"))
        before = self._losses.get(name)
        if event_type == "DELETED":
            after: losses.NodeLoss | None = losses.NodeLoss(name, losses.GONE, time.time())
        else:
            after = losses.loss_of(body, time.time())
        if after is None:
            self._losses.pop(name, None)
        else:
            self._losses[name] = after
        if (before is None) != (after is None) or (before is not None and after is not None
                                                   and before.status != after.status):
            logger.info("node %s: %s", name, "Ready" if after is None else after.status)
            for key in self.store.meshes_on_node(name):
                self.enqueue(key)

    def _forget(self, key: Key) -> None:
        """The mesh is gone: drop everything kept about it (nothing per mesh outlives it)."""
        self.store.unprime(key)
        for kind in CHILD_KINDS:
            self._ensured.pop((key, kind), None)
        if not self._colocated_by.get(key):
            self._colocated_by.pop(key, None)
        self._phases.pop(key, None)
        self._last_status_rv.pop(key, None)
        self._secrets_made.pop(key, None)
        self._leases.forget(key)
        for deps in self._colocated_by.values():
            deps.discard(key)  # (meshes colocated with this one keep their entry: they wait)
        if self.queue is not None:
            self.queue.discard(key)
        self._publish_phases()

    def _publish_phases(self) -> None:
        counts: dict[str, int] = {}
        for phase in self._phases.values():
            counts[phase] = counts.get(phase, 0) + 1
        metrics.set_phases(counts, (statuses.PHASE_PROGRESSING, statuses.PHASE_READY,
                                    statuses.PHASE_DEGRADED, statuses.PHASE_FAILED,
                                    statuses.PHASE_SUSPENDED))

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
        namespace, name = key
        body = await self.client.get_or_none(kubeclient.mesh_path(namespace, name))
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            self._forget(key)  # garbage collection removes the children
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
        try:
            await self._ensure_secret(mesh)
            await self._ensure_access_role(mesh)
            await self._ensure_service(mesh)
            plan, created = await self._reconcile_pods(mesh, previous)
        except (kubeclient.ApiError, ChildConflict) as e:
            error, failure = str(e), e
        pods = self.store.pods_by_rank(key, mesh.uid)
        status = statuses.compute_status(mesh, previous, pods, plan, error)
        if statuses.differs(previous, status):
            try:
                written = await self.client.merge_patch(
                    kubeclient.mesh_path(namespace, name, status=True), {"status": status})
                self._last_status_rv[key] = str(
                    (written.get("metadata") or {}).get("resourceVersion"))
            except kubeclient.ApiError as e:
                if e.not_found:
                    self._forget(key)
                    return None
                raise
        for type_, reason, message in eventing.transitions(previous, status, plan, created,
                                                           pods_before, name):
            await self.events.post(body, type_, reason, message)
        if plan is not None and plan.restarted:
            metrics.RESTARTS.labels(policy=mesh.restart_policy).inc(len(plan.restarted))
        self._phases[key] = str(status["phase"])
        self._publish_phases()
        if failure is not None:
            raise failure
        again = [WAITING_RECHECK_SECONDS] if plan is not None and plan.waiting is not None else []
        if plan is not None and plan.recheck is not None:
            again.append(max(plan.recheck, 0.1))  # when a lost node's toleration runs out
        if lease_left is not None:
            again.append(max(lease_left, 0.1))  # when the lease lapses unless renewed
        return min(again) if again else None

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
        self._forget((mesh.namespace, mesh.name))

    async def _list_pods(self, namespace: str, mesh: str) -> list[dict[str, Any]]:
        listed = await self.client.list(kubeclient.pods_path(namespace),
                                        label_selector=contract.mesh_label_selector(mesh))
        items = listed.get("items") or []
        for item in items:  # list items carry no kind/apiVersion; the store does not need them
            item.setdefault("metadata", {}).setdefault("namespace", namespace)
        return list(items)

    # --- secret -> service -> pods -------------------------------------------------------------

    def _recently_ensured(self, mesh: specs.MeshSpec, kind: str) -> bool:
        uid, when = self._ensured.get(((mesh.namespace, mesh.name), kind), ("", -1e18))
        return uid == mesh.uid and time.monotonic() - when < self.settings.resync_seconds

    async def _ensure_child(self, mesh: specs.MeshSpec, kind: str, path: str,
                            render: Any) -> None:
        """Create the child if absent; accept it if this mesh owns it; never update it (the
        token must not rotate)."""
        if self._recently_ensured(mesh, kind):
            return
        existing = await self.client.get_or_none(path)
        if existing is None:
            try:
                existing = await self.client.create(path.rsplit("/", 1)[0], render())
            except kubeclient.ApiError as e:
                if not e.conflict:
                    raise
                existing = await self.client.get(path)
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == mesh.uid for o in owners):
            raise ChildConflict(
                f"{kind} {path.rsplit('/', 1)[1]} exists and is not owned by this ProcMesh: if "
                f"an earlier mesh of this name was just deleted, this clears when garbage "
                f"collection removes it; otherwise delete it or rename the mesh")
        self._ensured[((mesh.namespace, mesh.name), kind)] = (mesh.uid, time.monotonic())

    async def _ensure_secret(self, mesh: specs.MeshSpec) -> None:
        """Create ``<mesh>-token``; never read it (the operator holds no ``get secrets``).

        Only while the mesh has no pods of its own: pods exist only after their Secret did, and
        a token must not change under running procs (so deleting the Secret of a suspended mesh
        rotates its token at resume). A mesh with ``spec.tokenSecretName`` brings its own.

        AlreadyExists cannot be checked by reading. It is taken as done only when this process
        created it, or when this mesh's access Role exists: that Role is created after the
        Secret, so its existence means an earlier run created the Secret. Otherwise the Secret is someone
        else's (an earlier mesh of this name that garbage collection is removing, or a Secret
        planted to give this mesh a known token): a conflict, retried with backoff.
        """
        if mesh.token_secret_name is not None or \
                self.store.pods_by_rank((mesh.namespace, mesh.name), mesh.uid):
            return
        token = rendering.new_token()
        try:
            await self.client.create(kubeclient.core_path(mesh.namespace, "secrets"),
                                     rendering.render_secret(mesh, token))
            self._secrets_made[(mesh.namespace, mesh.name)] = mesh.uid
            return
        except kubeclient.ApiError as e:
            if not e.conflict:
                raise
        if self._secrets_made.get((mesh.namespace, mesh.name)) == mesh.uid:
            return  # this process created it (and then failed later, e.g. on the Role)
        role = await self.client.get_or_none(
            kubeclient.roles_path(mesh.namespace, contract.access_role_name(mesh.name)))
        if role is None or not _owned_by(role, mesh.uid):
            raise ChildConflict(
                f"Secret {contract.secret_name(mesh.name)} exists but was not created for this "
                f"ProcMesh: if an earlier mesh of this name was just deleted, this clears when "
                f"garbage collection removes it; otherwise delete that Secret (the operator does "
                f"not read Secrets, and will not give this mesh a token someone else made)")

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

    async def _reconcile_pods(self, mesh: specs.MeshSpec, previous: Mapping[str, Any]
                              ) -> tuple[planning.Plan, list[str]]:
        key = (mesh.namespace, mesh.name)
        restarts = int(previous.get("restarts") or 0)
        partner: specs.MeshSpec | None = None
        partner_pods: dict[int, dict[str, Any]] = {}
        if mesh.colocate_with:
            partner_key = (mesh.namespace, mesh.colocate_with)
            partner_body = await self.client.get_or_none(
                kubeclient.mesh_path(mesh.namespace, mesh.colocate_with))
            if partner_body is not None:
                partner = specs.parse(partner_body)
                await self.store.prime(partner_key, lambda: self._list_pods(*partner_key))
                partner_pods = self.store.pods_by_rank(partner_key, partner.uid)
        pods = self.store.pods_by_rank(key, mesh.uid)
        needs_devices = (mesh.gpus.mode == contract.GPU_MODE_PINNED and not mesh.suspend
                         and len(pods) < mesh.size)
        lock = self._placement_lock if needs_devices else contextlib.nullcontext()
        async with lock:
            nodes: dict[str, placing.NodeInfo] = {}
            others: list[dict[str, Any]] = []
            if needs_devices:
                # Placement is decided on a fresh read: the budget must see every pinned proc.
                listed_nodes = await self.client.list("/api/v1/nodes")
                nodes = {n.name: n for n in (placing.node_info(item) for item in
                                             listed_nodes.get("items") or [])}
                listed = await self.client.list("/api/v1/pods", label_selector=contract.MESH_LABEL)
                others = [p for p in listed.get("items") or [] if stores.mesh_key_of(p) != key]
            plan = planning.plan(mesh, restarts=restarts, pods=pods, partner=partner,
                                 partner_pods=partner_pods, nodes=nodes, other_pods=others,
                                 settings=self.settings, losses=self._losses, now=time.time(),
                                 foreign=self.store.foreign_by_rank(key, mesh.uid))
            await self._delete_pods(mesh, plan)
            created = await self._create_pods(mesh, plan)
        return plan, created

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

        await asyncio.gather(*(delete(n, u) for n, u in plan.deletes))

    async def _create_pods(self, mesh: specs.MeshSpec, plan: planning.Plan) -> list[str]:
        semaphore = asyncio.Semaphore(CREATE_CONCURRENCY)
        created: list[str] = []

        async def create(rank: int, placement: rendering.ProcPlacement) -> None:
            pod = rendering.render_pod(mesh, rank, placement, self.settings)
            path = kubeclient.pods_path(mesh.namespace)
            async with semaphore:
                try:
                    result = await self.client.create(path, pod)
                    created.append(pod["metadata"]["name"])
                except kubeclient.ApiError as e:
                    if not e.conflict:
                        raise
                    # Created by an earlier run whose watch event has not arrived yet.
                    result = await self.client.get(
                        kubeclient.pods_path(mesh.namespace, pod["metadata"]["name"]))
            self.store.upsert(result)

        results = await asyncio.gather(*(create(r, p) for r, p in sorted(plan.creates.items())),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        created.sort(key=lambda n: int(n.rsplit("-", 1)[1]))
        return created


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("uid") == uid for o in owners)
