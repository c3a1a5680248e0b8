"""Proc meshes: spawn actor meshes on them, slice them, stop them.

A :class:`ProcMesh` is a view (a :class:`~.shape.Shape`) over a :class:`~.procs.ProcGroup`.
Backends create the group; this module is backend-free.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, NoReturn, TypeVar, cast, overload

from mesh_client._src.actor import context as context_mod
from mesh_client._src.actor import (
    messages,
    respawning,
    restarts,
    shutting_down,
    signatures,
    sources,
    tables,
    trees,
    unavailable,
    watching,
)
from mesh_client._src.actor.actor import Actor
from mesh_client._src.actor.actor_mesh import ActorMesh, gather
from mesh_client._src.actor.endpoint import (
    EXPLICIT_PORT,
    check_endpoint_kinds,
    endpoint_names,
    plain_method_names,
)
from mesh_client._src.actor.options import options
from mesh_client._src.actor.procs import ProcGroup, SpawnRecord
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.runtime import futures, offloading, ops, peers
from mesh_client._src.runtime.futures import Future

#: What ``mesh.<name>`` means on an actor mesh before its endpoints: an endpoint of one of these
#: names would be unreachable, so spawn refuses it.
_MESH_ATTRIBUTES = frozenset(name for name in dir(ActorMesh) if not name.startswith("_"))

T = TypeVar("T", bound=Actor)
R = TypeVar("R")


def _no_machine() -> Any:
    return None


#: This machine as a host mesh (``this_host()``): set by the local backend, which this layer does
#: not import; what ``host_mesh`` is for the proc this code runs in (``this_proc()`` in an actor).
this_machine: Callable[[], Any] = _no_machine


class ProcMesh(MeshTrait):
    """Procs laid out on named dimensions; ``spawn`` puts one actor on each."""

    def __init__(self, group: ProcGroup, shape: Shape, root: Shape | None = None) -> None:
        self._group = group
        self._shape = shape
        self._root = shape if root is None else root  # the mesh a slice comes from (to_table's hosts)
        self._stopped = False
        # "first": the first stop, set by dict.setdefault, one step for threads and for a signal
        # handler (Python runs those between bytecodes); no lock, which a handler that re-entered
        # stop() while its thread held it would wait for, for ever.
        self._stops: dict[str, _Stop] = {}

    def _with_shape(self, shape: Shape) -> ProcMesh:
        return ProcMesh(self._group, shape, self._root)

    def __reduce__(self) -> tuple[Any, ...]:
        # The root as state, set as an attribute: a proc server of an older release takes it too.
        return (ProcMesh, (self._group, self._shape), {"_root": self._root})

    def __repr__(self) -> str:
        return f"<ProcMesh {self._group.name!r} {self.sizes}>"

    @property
    def name(self) -> str:
        return self._group.name

    @property
    def initialized(self) -> Future[Literal[True]]:
        """Done at once, with True, as Monarch's: a ProcMesh is made only when its procs listen
        (spawn_procs and attach wait)."""
        return futures.completed(True)

    @property
    def host_mesh(self) -> Any:
        """The host mesh this one proc runs on, as Monarch's (which refuses a mesh of several
        procs with NotImplementedError, as here): for local procs, this machine, so that
        ``procs.slice(gpus=0).host_mesh.spawn_procs(...)`` starts procs beside it; for the
        proc this code runs in, its machine. Pods and workers are no host mesh here:
        RuntimeError saying what to use."""
        if len(self._shape) != 1:
            raise NotImplementedError("`ProcMesh.host_mesh` is not yet supported for non-singleton proc meshes.")
        host = self._group.host
        if host is None and self._group is getattr(context_mod.context().actor_instance.proc, "_group", None):
            host = this_machine()  # the proc this code runs in is on this machine
        if host is None:
            raise RuntimeError(f"{self!r} has no host mesh here: procmesh knows the host of local procs (this_host()'s) "
                               "only; a Kubernetes pod or an attach_to_workers worker is no host to spawn procs on "
                               "from this process. Spawn them with KubernetesHostMesh(...) or the worker host mesh, "
                               "or call this_host() in an actor on that proc")
        return host

    def to_table(self) -> str:
        """These procs as Monarch's table: a grid per index of the first of three dimensions,
        each proc ``<host>.gpu[<local>]`` (its rank in the mesh it was sliced from, split by
        that mesh's ``gpus`` size)."""
        return tables.proc_table(self._shape, dict(zip(self._root.labels, self._root.sizes)).get("gpus", 1))

    async def sync_workspace(self, workspace: Any, conda: bool = False, auto_reload: bool = False) -> None:
        """Refused, as by Monarch 0.7's ProcMesh (its HostMesh syncs code)."""
        raise NotImplementedError("sync_workspace is not implemented for ProcMesh. Use HostMesh.sync_workspace "
                                  "instead; procmesh's procs read this machine's files (locally) or the image's "
                                  "(Kubernetes), so there is nothing to sync")

    def activate(self) -> NoReturn:
        """Monarch's distributed-tensor context (its tensor engine), which procmesh does not have."""
        unavailable.tensor_engine("ProcMesh.activate()")

    def rank_tensor(self, dim: str | Sequence[str]) -> NoReturn:
        """Monarch's tensor of each proc's rank along ``dim`` (its tensor engine)."""
        unavailable.tensor_engine(f"ProcMesh.rank_tensor({dim!r})")

    def rank_tensors(self) -> NoReturn:
        """Monarch's rank tensors of every dimension (its tensor engine)."""
        unavailable.tensor_engine("ProcMesh.rank_tensors()")

    def spawn(self, name: str, Class: type[T], *args: Any, **kwargs: Any) -> T:
        """Start ``Class(*args, **kwargs)`` in every proc; returns at once, as in Monarch.

        Each ``__init__`` runs before any endpoint call reaches that actor. One that raises is a
        supervision event: the owner (the caller's actor, or the client's
        ``unhandled_fault_hook``) gets a MeshFailure, and calls to the actor raise
        SupervisionError. ``initialized`` waits for every ``__init__``. With
        ``mesh_client.options.spawn_waits`` set, spawn waits and raises the ActorError itself.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"spawn's first argument is the actor mesh's name, a non-empty string; got {name!r}")
        if not (isinstance(Class, type) and issubclass(Class, Actor)):
            raise ValueError(f"{Class!r} is not an Actor subclass; derive it from mesh_client.Actor")
        if self._stopped:
            raise RuntimeError(f"`ProcMesh` has already been stopped: cannot spawn {name!r} on {self!r}; spawn new procs")
        names = endpoint_names(Class)
        taken = sorted(names & _MESH_ATTRIBUTES)
        if taken:
            raise ValueError(f"{Class.__qualname__}'s endpoints {', '.join(taken)} share their names with attributes of "
                             f"the actor mesh (mesh.{taken[0]} would be the mesh's, not the endpoint): rename them")
        if not options.mixed_endpoints:
            check_endpoint_kinds(Class, names)
        init = signatures.of(Class.__init__, 1, f"{Class.__qualname__}.__init__() (spawn of {name!r})")
        if init is not None:  # wrong arguments raise TypeError here, as in Monarch, not in every proc
            init(args, kwargs)
        owner = context_mod.context().actor_instance
        actor_id = f"{name}-{uuid.uuid4().hex[:12]}"
        creator = context_mod.Creator(owner.name, owner.display)

        def encode() -> tuple[list[bytes | memoryview], dict[str, str]]:
            """The spawn's payload, and the text of the files of its by-value code (for the remote
            tracebacks' lines); again at a respawn, when this mesh pickles its procs' new addresses."""
            try:
                return sources.dumps_with_sources((Class, args, kwargs, self, creator))
            except Exception as exc:
                messages.raise_unpicklable(
                    f"the spawn of {Class.__qualname__} (the class, by value where the script defines it, and "
                    f"its arguments)", exc, (*args, *kwargs.values()))

        payload, texts = encode()
        group, shape = self._group, self._shape
        what = f"__init__ of {Class.__qualname__} ({name!r})"
        futs = [
            group.peers[p].request(
                (ops.SPAWN, actor_id, name, i, shape.labels, shape.sizes, sources.not_yet_sent(group.peers[p], texts)),
                payload,
                functools.partial(messages.decode_reply, what, group.displays[p]),
            )
            for i, p in enumerate(shape.ranks)
        ]
        spawned = gather(futs, lambda values: None, fail_fast=peers.is_lost)
        trees.fix_route(actor_id, group)  # flat or through a tree: for this mesh's whole life
        group.born[actor_id] = list(group.incarnations)
        keeper = None
        if group.owner is not None:  # the process that made the procs may respawn after a restart
            group.spawns[actor_id] = SpawnRecord(actor_id, name, encode, what, shape, Class, owner.actor_id, owner.display)
            keeper = respawning.keep_while_held(group, actor_id)
        mesh: ActorMesh[T] = ActorMesh(
            group, shape, actor_id, name, Class.__qualname__, names, spawned, repr(Class), plain_method_names(Class),
            keeper, signatures.of_endpoints(Class, names, name, EXPLICIT_PORT),
        )
        if options.spawn_waits:  # its error is raised here, and so is no supervision event too
            try:
                spawned.get()
            except BaseException:
                group.spawns.pop(actor_id, None)
                mesh.stop("its spawn failed")  # the actors whose __init__ did run: nobody holds them
                raise
        watching.watch(group, shape, actor_id, name, Class, owner.actor_id, owner.display)
        context_mod.adopt(actor_id, mesh)  # made by an actor: stopped with it
        # Typed as the actor class, as Monarch types it: the checker sees each endpoint as an
        # Endpoint (endpoint.py) and the mesh operations that Actor declares for it (actor.py).
        return cast(T, mesh)

    def _elastic(self) -> tuple[str, int, int] | None:
        """(run id, restart count, max restarts) for torchelastic; backends may know better
        (in a proc: as the client knew them when it sent this mesh; None if it did not say)."""
        return self._group.elastic_info()

    @overload
    def run(self, fn: Callable[[], Awaitable[R]]) -> Future[list[R]]: ...

    @overload
    def run(self, fn: Callable[[], R]) -> Future[list[R]]: ...

    def run(self, fn: Callable[[], Any]) -> Future[list[Any]]:
        """Run ``fn`` in every proc (as ``bootstrap`` does; a coroutine is awaited there); gives
        the list of results."""
        return _run_everywhere(self._group, self._shape, fn)

    def reconnect(self) -> list[int]:
        """Reach the procs that were restarted (or lost) since they were spawned or attached.

        After a proc dies, its actors are gone and calls to them fail, naming the restart. On
        Kubernetes the operator restarts it per ``restartPolicy``: this waits until the mesh is
        Ready again. Locally nothing restarts a proc by itself: this starts a new process in
        each dead one's place. Either way it connects, runs the mesh's ``bootstrap`` in each
        restarted proc, and returns their ranks (in the root mesh). Then spawn your actors
        again, or call :meth:`respawn` instead. Old actor handles on restarted procs keep
        failing at once ("was restarted ... re-spawn your actors") until re-spawned. Call it
        once a failure was seen: a proc whose death this client has not noticed yet (no call
        failed, no connection dropped) and whose pod was not replaced yet is not waited for.
        """
        if self._stopped:
            raise RuntimeError(f"`ProcMesh` has already been stopped: cannot reconnect {self!r}; spawn new procs")
        return restarts.reconnect(self._group)

    def respawn(self) -> list[int]:
        """:meth:`reconnect`, then spawn every actor mesh spawned on these procs again, in each
        restarted proc, with the same name, class and arguments (the first spawn's, kept by
        this client), so the handles you hold work again. The actors start afresh: what they
        held is lost, and their ``__init__`` runs again (the first that raises is raised here).
        Returns the restarted procs' ranks. Like :meth:`reconnect`, it acts on the whole root
        mesh a slice comes from."""
        if self._stopped:
            raise RuntimeError(f"`ProcMesh` has already been stopped: cannot respawn on {self!r}; spawn new procs")
        return restarts.respawn(self._group)

    async def reconnect_async(self) -> list[int]:
        """:meth:`reconnect` for async controllers (the loop serves other tasks meanwhile)."""
        return await offloading.run_blocking(self.reconnect, name="procmesh-reconnect", at_exit=True)

    async def respawn_async(self) -> list[int]:
        """:meth:`respawn` for async controllers (the loop serves other tasks meanwhile)."""
        return await offloading.run_blocking(self.respawn, name="procmesh-respawn", at_exit=True)

    async def logging_option(
        self, stream_to_client: bool = False, aggregate_window_sec: int | None = None, level: int = logging.INFO,
    ) -> None:
        """Monarch's logging options for these procs (a coroutine, as Monarch's:
        ``asyncio.run(procs.logging_option(stream_to_client=True, level=logging.INFO))``).

        ``level`` sets the root logger's level in every proc (INFO from the start, as Monarch's).
        ``stream_to_client`` is our output forwarding: True leads each line the procs print with
        ``[<mesh> rank <r>] `` in this terminal (locally the procs write it; on Kubernetes this
        client reads the pods' logs), False leaves the lines bare (locally) or stops reading the
        logs (Kubernetes), as ``forward_output=`` does at spawn. Monarch streams nothing unless its
        procs were spawned with log forwarding on. ``aggregate_window_sec``: Monarch prints the
        forwarded lines in batches every that many seconds, similar lines folded; here each line
        reaches the terminal as its proc writes it, so nothing is batched and the window is only
        checked, as Monarch checks it (not without ``stream_to_client``). Acts on the whole mesh a
        slice comes from; procs restarted later keep the prefix choice, and start at INFO again.
        """
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 255:
            raise ValueError(f"Invalid logging level: {level}")
        if aggregate_window_sec is not None and not stream_to_client:
            raise RuntimeError("cannot set aggregate window without streaming to client")
        if aggregate_window_sec is not None and (isinstance(aggregate_window_sec, bool) or not isinstance(aggregate_window_sec, int)
                                                 or aggregate_window_sec < 0):
            raise TypeError(f"aggregate_window_sec is a whole number of seconds (or None); got {aggregate_window_sec!r}")
        mode = getattr(self._group.owner, "logging_mode", None)
        if mode is None:
            raise RuntimeError(f"logging_option sets up the procs' output where they were started: call it in the program "
                               f"that spawned or attached {self!r}")
        group = self._group

        def set_mode() -> None:
            in_every_proc = mode(stream_to_client, level)  # the controller's side first (Kubernetes: the log reader)
            whole = Shape(["procs"], [len(group.peers)])
            _run_everywhere(group, whole, in_every_proc).get()

        await offloading.run_blocking(set_mode, name="procmesh-logging-option", at_exit=True)

    def stop(self, reason: str = "stopped by client") -> Future[None]:
        """Stop every proc of this mesh; the future completes once they are gone (their actors'
        ``__cleanup__`` and their finalizers ran), raising what went wrong. Called where the
        thread runs an asyncio loop (``await procs.stop()``), the stop goes on on a thread of its
        own, so the loop serves its other tasks meanwhile. A later stop's future is the first's:
        it completes only when the procs are gone, except in a signal handler that interrupted
        the stop on its own thread, which could never wait for it (done at once, as before). A
        Ctrl-C while it waits is raised by this call; the future then says the stop was cut
        short."""
        stop = _Stop()
        first = self._stops.setdefault("first", stop)  # one stop, whatever thread asks
        if first is not stop:
            if threading.get_ident() in (first.caller, first.ending_on):
                # Re-entered by the thread that runs the stop (a signal handler interrupted
                # it): that stop goes on only once this caller returns, so it cannot be
                # waited for here. Quiet, as a second stop.
                return futures.completed(None)
            return first.future
        self._stopped = True
        try:
            shutting_down.forget(self)
            context_mod.disown(self._group.run_id, len(self._shape))
            began = time.monotonic()
            for p in self._shape.ranks:
                self._group.stopping.setdefault(p, began)
            offloading.off_the_loop(functools.partial(self._end_procs, reason, stop), name="procmesh-stop")
        finally:
            stop.caller = None
        return stop.future

    def _end_procs(self, reason: str, stop: _Stop) -> None:
        """The blocking half of :meth:`stop`: the procs end; ``stop.future`` completes with the outcome."""
        fut = stop.future
        stop.ending_on = threading.get_ident()
        try:
            if self._group.owner is not None:
                self._group.owner.stop(list(self._shape.ranks), reason)
                for p in self._shape.ranks:  # gone: nothing of them kept in this process's table
                    peers.forget_peer(self._group.peers[p])
            else:
                gather(
                    [self._group.peers[p].request((ops.STOP, reason), (), lambda raw: None) for p in self._shape.ranks],
                    lambda values: None,
                ).get()
        except BaseException as exc:  # the stop's outcome: raised where its future is waited for
            failure: BaseException | None = exc
        else:
            failure = None
        finally:
            stop.ending_on = None
        if len(self._group.stopping) == len(self._group.addresses):  # every proc: its actor meshes went too
            for actor_id in list(self._group.born):
                trees.forget_route(actor_id)
        if failure is None:
            fut.set_result(None)
        elif isinstance(failure, Exception):
            fut.set_exception(failure)
        else:  # a Ctrl-C: raised here, to the caller it came to; the future is every later stop's too
            fut.set_exception(RuntimeError(
                f"the stop of this proc mesh was interrupted ({type(failure).__name__}) before its "
                "procs were gone: they may still be ending"))
            raise failure

    def __enter__(self) -> ProcMesh:
        """``with procs:`` stops the mesh at the end of the block (Monarch has ``async with`` only)."""
        self._check_not_stopped()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop().get()

    async def __aenter__(self) -> ProcMesh:
        """``async with procs:`` stops the mesh at the end of the block; a stopped mesh raises
        Monarch's RuntimeError here."""
        self._check_not_stopped()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()  # off the event loop, which serves its other tasks meanwhile

    def _check_not_stopped(self) -> None:
        if self._stopped:
            raise RuntimeError(f"`ProcMesh` has already been stopped: {self!r} cannot be entered again; spawn new "
                               "procs")


class _Stop:
    """A proc mesh's first stop: the future every later stop returns, and the threads that run
    it now, where a later stop (a signal handler's) could never wait for it."""

    def __init__(self) -> None:
        self.future: Future[None] = Future(None)
        self.caller: int | None = threading.get_ident()  # inside stop(), until it returns
        self.ending_on: int | None = None  # the blocking half's, while it runs


def _run_everywhere(group: ProcGroup, shape: Shape, fn: Callable[[], Any]) -> Future[list[Any]]:
    payload, texts = sources.dumps_with_sources(fn)
    futs = [
        group.peers[p].request(
            (ops.BOOTSTRAP, sources.not_yet_sent(group.peers[p], texts)),
            payload,
            functools.partial(messages.decode_reply, f"bootstrap {getattr(fn, '__qualname__', fn)!r}", group.displays[p]),
        )
        for p in shape.ranks
    ]
    return gather(futs, lambda values: values, fail_fast=peers.is_lost)
