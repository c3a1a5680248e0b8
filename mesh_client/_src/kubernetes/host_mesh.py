"""``KubernetesHostMesh``: hosts of a cluster; ``spawn_procs`` creates a ProcMesh, and its token
Secret (the creator generates the token: it needs ``create secrets``, never a read), and
attaches. The mesh lives as long as its creator (:mod:`.lifetimes`) unless told to outlive it."""

from __future__ import annotations

import functools
import itertools
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from typing import Any, Literal

from mesh_client._src import contract
from mesh_client._src.actor import spawns
from mesh_client._src.actor.owned_hosts import OwnedHostMesh
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes import attaching, lifetimes, manifests, terminating
from mesh_client._src.kubernetes.errors import KubernetesMeshError
from mesh_client._src.runtime import futures, natives, offloading
from mesh_client._src.runtime.futures import Future

_names = itertools.count()


class KubernetesHostMesh(MeshTrait, OwnedHostMesh):
    """``hosts`` nodes' worth of procs in ``namespace``; each ``spawn_procs`` is one ProcMesh.

    ``image`` and ``template`` (the ProcMesh ``spec.template``: resources, env, nodeSelector,
    tolerations, affinity, schedulerName, serviceAccountName, labels, annotations) apply to
    every mesh it spawns. A spawned mesh is deleted ``lease_seconds`` after this program stops
    renewing its lease (killed, crashed, exited), and with this program's pod in a cluster.
    What its procs print shows on this program's stdout unless ``forward_output=False``.
    ``queue``: a Kueue LocalQueue of ``namespace``; each mesh then waits (in ``spawn_procs``,
    up to ``timeout``) until Kueue admits it as one workload.
    Each host is a node of its own unless ``hosts_on_distinct_nodes=False`` (the ProcMesh's
    ``spec.placement.hosts: Any``, e.g. several hosts on a one-node test cluster).
    ``stop()`` deletes the meshes it spawned, those of spawns in flight once up; ``shutdown()``
    too, and then refuses to spawn more (Monarch's owned host mesh); ``async with hosts:``
    shuts it down at the end of the block.
    """

    def __init__(
        self,
        hosts: int = 1,
        namespace: str | None = None,
        *,
        image: str | None = None,
        template: Mapping[str, Any] | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        api_client: Any = None,
        timeout: float = attaching.DEFAULT_TIMEOUT,
        via_api_server: bool = False,
        lease_seconds: int = lifetimes.DEFAULT_LEASE_SECONDS,
        forward_output: bool | None = None,
        queue: str | None = None,
        hosts_on_distinct_nodes: bool = True,
    ) -> None:
        self._shape = Shape([contract.HOSTS_DIM], [hosts])
        self.hosts = hosts
        client = api_client or api_mod.make_api_client(kubeconfig, context)
        self.api = api_mod.KubeApi(client, namespace or api_mod.default_namespace(kubeconfig, context))
        self.template = dict(template or {})
        if image:
            self.template["image"] = image
        self.timeout = timeout
        self.via_api_server = via_api_server  # port-forward through the API server, not pod IPs
        self.lease_seconds = lease_seconds  # how long a spawned mesh outlives its last renewal
        self.forward_output = forward_output  # procs' output on stdout (None: PROCMESH_FORWARD_OUTPUT)
        self.queue = queue  # a Kueue LocalQueue: every mesh spawned is admitted through it
        self.host_placement = contract.HOSTS_ON_DISTINCT_NODES if hosts_on_distinct_nodes \
            else contract.HOSTS_ON_ANY_NODES  # spec.placement.hosts of every spawned mesh
        self._spawns = spawns.Spawns()  # what stop() and shutdown() stop

    def _with_shape(self, shape: Shape) -> KubernetesHostMesh:
        raise NotImplementedError("slicing a Kubernetes host mesh is not supported; spawn with fewer hosts")

    @property
    def initialized(self) -> Future[Literal[True]]:
        """Done at once, with True, as Monarch's: each ``spawn_procs`` waits for its own procs."""
        return futures.completed(True)

    def __repr__(self) -> str:
        return f"<KubernetesHostMesh {self.api.namespace} hosts={self.hosts}>"

    def spawn_procs(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        *,
        gpus: manifests.GpuRequest = None,
        memory_fraction: float | None = None,
        device_class: str | None = None,
        colocate_with: ProcMesh | str | None = None,
        restart_policy: str | None = None,
        max_restarts: int | None = None,
        port: int | None = None,
        outlive: bool = False,
    ) -> ProcMesh:
        """Create a ProcMesh of ``hosts`` x ``per_host`` procs, wait until Ready, and attach.
        Without ``per_host``, one proc per host (extent ``{hosts: N}``), as Monarch's.

        ``gpus``: None, ``"plugin"``, ``"dra"`` (ResourceClaims of ``device_class``, default
        ``gpu.nvidia.com``, allocated by the kube-scheduler), or device IDs (pinned);
        ``memory_fraction`` caps each proc's PyTorch allocator before any actor runs.
        ``colocate_with`` (a mesh or its name) puts proc p on the node (pinned: the device; dra:
        the same claim, so the same device) of that mesh's proc p. ``stop()`` deletes the
        resource.
        ``outlive=True``: no lease and no owner, so the mesh stays after this program ends
        (delete it yourself: ``procmesh delete NAME``).
        """
        spawn = self._spawns.begin()
        if spawn is None:
            raise self._shut_down_error()
        try:
            procs = self._create(per_host, bootstrap, name, gpus, memory_fraction, device_class, colocate_with,
                                 restart_policy, max_restarts, port, outlive)
        except BaseException:
            self._spawns.end(spawn, None)
            raise
        late = self._spawns.end(spawn, procs)
        if late:  # stop() or shutdown() came while this spawn waited: its mesh is theirs to stop
            self._spawns.stop_late(spawn, late, procs, self._stop_reason())
            if self._spawns.shut_down:
                raise self._shut_down_error()
            raise RuntimeError(f"{self!r}.stop() came while this spawn waited for ProcMesh {procs.name}, so it "
                               "was deleted as stop() deletes what the host mesh spawned; spawn again")
        return procs

    def _create(
        self,
        per_host: Mapping[str, int] | None,
        bootstrap: Callable[[], Any] | None,
        name: str | None,
        gpus: manifests.GpuRequest,
        memory_fraction: float | None,
        device_class: str | None,
        colocate_with: ProcMesh | str | None,
        restart_policy: str | None,
        max_restarts: int | None,
        port: int | None,
        outlive: bool,
    ) -> ProcMesh:
        """The body of :meth:`spawn_procs`: create the mesh and its token, wait, attach."""
        name = name or f"procs-{os.getpid()}-{next(_names)}"
        other = colocate_with.name if isinstance(colocate_with, ProcMesh) else colocate_with
        body = manifests.proc_mesh_manifest(
            name,
            hosts=self.hosts,
            per_host=dict(per_host or {}),
            gpus=gpus,
            memory_fraction=memory_fraction,
            device_class=device_class,
            colocate_with=other,
            template=self.template,
            host_placement=self.host_placement,
            restart_policy=restart_policy,
            max_restarts=max_restarts,
            port=port,
            lease_seconds=None if outlive else self.lease_seconds,
            owner=None if outlive else lifetimes.creator_pod_owner(
                self.api.namespace, os.environ, api_mod.pod_namespace()),
            labels={contract.KUEUE_QUEUE_LABEL: self.queue} if self.queue else None,
        )
        # The creator makes the token, so it never reads a Secret: the mesh names a Secret of
        # a fresh random name (a name picked in advance by someone else is refused below), which
        # is created after the mesh so that it can be owned by it (deleted with it).
        token = secrets.token_hex(32).encode()
        body["spec"]["tokenSecretName"] = f"{name}-token-{secrets.token_hex(4)}"
        if not outlive:
            terminating.install()  # SIGTERM deletes it too, not only a normal exit
        try:
            created = self.api.create_mesh(body)
        except KubernetesMeshError as exc:
            raise older_crd_refusal(body, exc) from None
        lease = None if outlive else lifetimes.LeaseRenewer(self.api, name, self.lease_seconds,
                                                            uid=created["metadata"]["uid"])
        try:
            if lease is not None:
                lease.start()
            self.api.create_token_secret(created, token)
            mesh = attaching.wait_ready(self.api, name, self.timeout)
            procs = attaching.connect_mesh(
                self.api, mesh, created=True, bootstrap=bootstrap, via_api_server=self.via_api_server, token=token,
                lease=lease, forward_output=self.forward_output, timeout=self.timeout,
            )
        except BaseException as exc:
            if lease is not None:
                lease.stop()
            try:
                self.api.delete_mesh(name, uid=created["metadata"]["uid"])
            except KubernetesMeshError as failed:  # the cause stays the error raised
                note = (f"procmesh: the ProcMesh {self.api.namespace}/{name} made for this spawn could not be "
                        f"deleted ({failed}); " + ("the operator deletes it when its lease lapses"
                                                   if lease is not None else "delete it yourself"))
                if hasattr(exc, "add_note"):  # Python 3.11+
                    exc.add_note(note)
                else:
                    print(note, file=sys.stderr)
            raise
        return procs

    def stop(self) -> Future[None]:
        """Stop every proc mesh spawned here and not stopped yet, as its ``stop()`` does (a mesh
        created here is deleted, ``outlive=True`` ones too), and, as Monarch drains the spawns
        in flight, the mesh of each spawn still waiting once it is up (that spawn then raises);
        this host mesh spawns again after. The future completes once they are all gone, and
        after a stop or shutdown called before this one, with the first failure if one could
        not be; ``await hosts.stop()`` leaves the event loop free meanwhile. After
        :meth:`shutdown` the future raises RuntimeError, as Monarch's."""
        return self._stop_spawned(shutdown=False)

    def shutdown(self) -> Future[None]:
        """:meth:`stop`, and no more ``spawn_procs`` on this host mesh (RuntimeError, as Monarch's
        after its ``shutdown()``; so do a later ``shutdown()`` and ``stop()``: their futures
        raise it)."""
        return self._stop_spawned(shutdown=True)

    def _shutdown_once(self) -> Future[None]:
        return self._stop_spawned(shutdown=True, once=True)

    def _stop_spawned(self, shutdown: bool, once: bool = False) -> Future[None]:
        """The meshes are deleted where blocking is allowed (``await hosts.stop()`` leaves the
        loop free); the future completes after any stop taken before this one, too."""
        taken = self._spawns.shutdown_once() if once else self._spawns.take(shutdown)
        if taken is None:
            return self._spawns.refusal(self._shut_down_error())
        if isinstance(taken, Future):  # once: the shutdown already under way, or done
            return taken
        spawned, stopping = taken
        finished = self._spawns.finish(stopping)
        offloading.off_the_loop(functools.partial(self._spawns.stop_own, stopping, spawned, self._stop_reason()),
                                name="procmesh-host-stop")
        return finished

    def _stop_reason(self) -> str:
        return "host mesh shut down" if self._spawns.shut_down else "host mesh stopped"

    def _is_shut_down(self) -> bool:
        return self._spawns.shut_down

    def _shut_down_error(self) -> RuntimeError:
        return RuntimeError(f"HostMesh has already been shut down: {self!r}.shutdown() was called, which deleted "
                            "what it spawned; make a new KubernetesHostMesh to spawn more procs")

    async def spawn_procs_async(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        *,
        gpus: manifests.GpuRequest = None,
        memory_fraction: float | None = None,
        device_class: str | None = None,
        colocate_with: ProcMesh | str | None = None,
        restart_policy: str | None = None,
        max_restarts: int | None = None,
        port: int | None = None,
        outlive: bool = False,
    ) -> ProcMesh:
        """:meth:`spawn_procs` for async controllers: ``procs = await hosts.spawn_procs_async(...)``.

        The event loop serves other tasks while the mesh becomes Ready. Cancelling the awaiting
        task ends the wait and deletes the ProcMesh (as any error of ``spawn_procs`` does)."""
        def blocking() -> ProcMesh:
            return self.spawn_procs(per_host, bootstrap, name, gpus=gpus, memory_fraction=memory_fraction,
                                    device_class=device_class, colocate_with=colocate_with,
                                    restart_policy=restart_policy, max_restarts=max_restarts, port=port,
                                    outlive=outlive)

        natives.warn_if_missing()  # here, at the caller's await: the spawn runs on a thread of its own
        if not outlive:
            terminating.install()  # here, on the loop's thread: the spawn's own thread cannot set it
        return await offloading.run_blocking(blocking, name="procmesh-spawn-procs", discard=lambda mesh: mesh.stop(),
                                             at_exit=True)


def older_crd_refusal(body: Mapping[str, Any], exc: KubernetesMeshError) -> KubernetesMeshError:
    """``exc``, saying what to do where a cluster's CRD (a chart before 2026-12-07) refused a
    mesh without perHost that ``spawn_procs()`` without ``per_host`` asks for; the API server's
    words name spec.perHost alone, not the argument."""
    said = str(exc)
    if body["spec"].get("perHost") or "spec.perHost" not in said or "at least 1 item" not in said:
        return exc
    return KubernetesMeshError(
        f"{said}; this cluster's ProcMesh CRD is older than meshes without perHost (spawn_procs() without "
        f"per_host: one proc per host): upgrade the chart (README, \"Upgrade\"), or pass per_host={{'procs': 1}} "
        f"(extent {{hosts: N, procs: 1}})")
