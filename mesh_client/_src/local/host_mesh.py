"""``this_host()`` and ``this_proc()``: spawning proc meshes on this machine.

Local procs and this controller's own proc server listen on TCP and on a unix socket in this
process's private directory (:mod:`.rundirs`); clients on this host reach them over AF_UNIX
(:mod:`mesh_client._src.runtime.unixlinks`), anything else over TCP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import secrets
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor import ports, proc_mesh, shutting_down
from mesh_client._src.actor.actor import Actor
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.local import rundirs
from mesh_client._src.local.bootstrap import default_bootstrap_cmd
from mesh_client._src.local.launcher import CommandSpec, LocalProcs
from mesh_client._src.runtime import futures, natives, offloading, unixlinks
from mesh_client._src.runtime.futures import Future
from mesh_client._src.server import output

T = TypeVar("T", bound=Actor)

_names = itertools.count()


def connected_mesh(group: ProcGroup, shape: Shape, bootstrap: Callable[[], Any] | None) -> ProcMesh:
    """The mesh of ``group``'s procs once every one is connected and ``bootstrap`` ran in each;
    on any failure its procs are stopped and the cause raised."""
    mesh = ProcMesh(group, shape)
    group.bootstrap = bootstrap  # run again in a proc that restarts (ProcMesh.reconnect)
    try:
        for peer in group.peers:
            peer.connect()
        if bootstrap is not None:
            mesh.run(bootstrap).get()
        natives.warn_if_missing()  # raises where warnings are errors (-W error): a failed spawn
    except BaseException:
        with contextlib.suppress(Exception):  # the cause is the error raised
            mesh.stop().get()  # gone when this raises, also where a loop runs (stop() goes on beside it there)
        raise
    ctx_mod.adopt(group.run_id, mesh)  # made by an actor: stopped with it
    shutting_down.made(mesh)
    return mesh


def proc_displays(name: str, shape: Shape) -> list[str]:
    """Human names of each proc, e.g. ``policy[gpus=1]``, used in every error message."""
    displays = []
    for point in shape.points():
        coords = ",".join(f"{k}={v}" for k, v in point.items())
        displays.append(f"{name}[{coords or point.rank}]")
    return displays


class HostMesh(MeshTrait):
    """Hosts that can run procs; ``this_host()`` is this machine alone."""

    def __init__(self, python: str | None = None) -> None:
        self._shape = Shape([], [])
        self._python = python  # the interpreter of the procs, when not this one

    def _with_shape(self, shape: Shape) -> HostMesh:
        return self

    def with_python_executable(self, path: str) -> HostMesh:
        """The same hosts, starting their procs with the Python at ``path``."""
        return HostMesh(path)

    @property
    def is_fake_in_process(self) -> bool:
        """False: these procs are real processes (Monarch's fake in-process hosts are a test aid)."""
        return False

    def __repr__(self) -> str:
        return f"<HostMesh local {socket.gethostname()}>"

    def __eq__(self, other: object) -> bool:
        """This machine equals this machine (``procs.slice(gpus=0).host_mesh == this_host()``,
        as in Monarch), unless the two start their procs with different Pythons."""
        return isinstance(other, HostMesh) and other._python == self._python

    def __hash__(self) -> int:
        return hash((HostMesh, self._python))

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent with every local proc group (ProcGroup.host): its Python alone, not its shape.
        return (HostMesh, (self._python,))

    def shutdown(self) -> Future[None]:
        """Refused, as Monarch's ``this_host().shutdown()``: the future raises RuntimeError.
        This machine is not the program's to shut down; stop the proc meshes it spawned."""
        return _refused("cannot shut down `HostMesh` that is a reference instead of owned")

    def stop(self) -> Future[None]:
        """Refused, as Monarch's ``this_host().stop()``: the future raises RuntimeError."""
        return _refused("cannot stop `HostMesh` that is a reference instead of owned")

    async def __aenter__(self) -> HostMesh:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Shuts down, as Monarch's ``async with this_host():`` does: refused, so this raises."""
        await self.shutdown()

    async def sync_workspace(self, workspace: Any, conda: bool = False, auto_reload: bool = False) -> None:
        """Refused, as Monarch refuses it on ``this_host()``: local procs read this machine's
        files already, so there is nothing to copy."""
        raise RuntimeError("cannot call sync_workspace on a sliced host mesh or one that was sent over an actor "
                           "endpoint; this_host()'s procs read this machine's files already, so there is nothing "
                           "to sync (on Kubernetes, put the code in the proc-server image or a volume)")

    @property
    def initialized(self) -> Future[Literal[True]]:
        """Done at once, with True, as Monarch's: this machine is here."""
        return futures.completed(True)

    def spawn_procs(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        bootstrap_command: CommandSpec = None,
        *,
        forward_output: bool | None = None,
    ) -> ProcMesh:
        """Start one proc server per point of ``per_host`` and return their mesh.

        ``bootstrap_command`` (a BootstrapCommand or a callable of the point) sets each proc's
        command and env, e.g. ``CUDA_VISIBLE_DEVICES``. ``bootstrap`` runs in every proc before
        any actor, e.g. ``partial(torch.cuda.set_per_process_memory_fraction, 0.3)``.
        What the procs print shows in this terminal, each line led by ``[<name> rank <r>] ``
        as on Kubernetes; ``forward_output=False`` (or ``PROCMESH_FORWARD_OUTPUT=0``) leaves
        the lines bare.
        Returns once every proc is up and bootstrapped; raises with the cause otherwise.
        """
        shape = Shape.from_sizes({} if per_host is None else per_host)
        name = name or f"procs{next(_names)}"
        displays = proc_displays(name, shape)
        token = secrets.token_hex(32)
        if self._python is not None and bootstrap_command is None:
            bootstrap_command = dataclasses.replace(default_bootstrap_cmd(), program=self._python)
        prefixes = [output.proc_prefix(name, rank) for rank in range(len(displays))] \
            if output.forwarding_enabled(forward_output) else None
        procs = LocalProcs(name, list(shape.points()), displays, bootstrap_command, token, prefixes)
        addresses = procs.start()
        group = ProcGroup(name, addresses, token.encode(), displays, owner=procs, proc_ids=procs.proc_ids)
        group.host = self
        procs.watch(group.peers)
        mesh = connected_mesh(group, shape, bootstrap)
        procs.spawned = True
        return mesh

    async def spawn_procs_async(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        bootstrap_command: CommandSpec = None,
        *,
        forward_output: bool | None = None,
    ) -> ProcMesh:
        """:meth:`spawn_procs` for async controllers: the event loop serves other tasks while
        the procs start and bootstrap (procs started for a cancelled task are stopped)."""
        natives.warn_if_missing()  # here, at the caller's await: the spawn runs on a thread of its own
        return await offloading.run_blocking(
            lambda: self.spawn_procs(per_host, bootstrap, name, bootstrap_command, forward_output=forward_output),
            name="procmesh-spawn-procs", discard=lambda mesh: mesh.stop())


def this_host() -> HostMesh:
    """This machine, as a host mesh of one host (inside an actor: the actor's machine)."""
    return HostMesh()


proc_mesh.this_machine = this_host


def _refused(why: str) -> Future[None]:
    """A future failed with Monarch's words for a host mesh this program does not own."""
    fut: Future[None] = Future(None)
    fut.set_exception(RuntimeError(f"{why}; this_host() is this machine, which no program owns: stop the proc "
                                   "meshes it spawned instead (procs.stop(), or shutdown_context() for all)"))
    return fut


_client_proc: ProcMesh | None = None
_client_proc_lock = threading.Lock()


def this_proc() -> ProcMesh:
    """This process as a one-proc mesh. In the controller it starts an in-process proc server."""
    proc = ctx_mod.context().actor_instance.proc
    if proc is not None:
        return proc
    global _client_proc
    with _client_proc_lock:
        if _client_proc is None:
            _client_proc = _serve_in_process()
    return _client_proc


def _home() -> tuple[tuple[str, int], bytes, str | None]:
    """Where other procs send values for ports opened in this process: its own proc server."""
    group = this_proc()._group
    return group.addresses[0], group.token, group.proc_ids[0]


ports.home_provider = _home

_controllers: dict[str, Future[Any]] = {}
_controllers_lock = threading.Lock()


def get_or_spawn_controller(name: str, Class: type[T], *args: Any, **kwargs: Any) -> Future[T]:
    """The one actor named ``name`` of this process, spawned on ``this_proc()`` at the first ask.

    Later asks with the same name get the same mesh, whatever their class and arguments (as in
    Monarch). Singletons are per process: a proc's actors asking get one in that proc.
    """
    with _controllers_lock:
        fut = _controllers.get(name)
        if fut is None:
            fut = _controllers[name] = Future(None)
            try:
                fut.set_result(this_proc().spawn(name, Class, *args, **kwargs))
            except BaseException as exc:
                del _controllers[name]
                fut.set_exception(exc)
    return fut


def _serve_in_process() -> ProcMesh:
    from mesh_client._src.server.dispatch import ProcServer

    token = secrets.token_hex(32).encode()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    host, port = listener.getsockname()
    incarnation = uuid.uuid4().hex  # the proc a port's sender means (wire/binding.py)
    group = ProcGroup("client", [(host, port)], token, ["client[0]"], proc_ids=[incarnation])
    group.host = this_host()
    mesh = ProcMesh(group, Shape([], []))
    rundirs.ensure()  # local procs send port values here: over AF_UNIX too
    try:
        unix = unixlinks.listen((host, port))
    except OSError:  # the directory went away: procs use TCP, which always works
        unix = None
    server = ProcServer(listener, token, identity={"mesh": "client", "rank": 0, "coords": {}, "address": f"{host}:{port}"},
                        on_stop=lambda reason: None, this_proc=mesh, also_listening=[unix] if unix is not None else [],
                        incarnation=incarnation)
    server.start()
    return mesh
