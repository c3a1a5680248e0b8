"""``this_host()`` and ``this_proc()``: spawning proc meshes on this machine."""

from __future__ import annotations

import itertools
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.local.launcher import CommandSpec, LocalProcs

_names = itertools.count()


def proc_labels(name: str, shape: Shape) -> list[str]:
    """Human names of each proc, e.g. ``policy[gpus=1]``, used in every error message."""
    labels = []
    for point in shape.points():
        coords = ",".join(f"{k}={v}" for k, v in point.items())
        labels.append(f"{name}[{coords or point.rank}]")
    return labels


class HostMesh(MeshTrait):
    """Hosts that can run procs; ``this_host()`` is this machine alone."""

    def __init__(self) -> None:
        self._shape = Shape([], [])

    def _with_shape(self, shape: Shape) -> HostMesh:
        return self

    def __repr__(self) -> str:
        return f"<HostMesh local {socket.gethostname()}>"

    def spawn_procs(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        bootstrap_command: CommandSpec = None,
    ) -> ProcMesh:
        """Start one proc server per point of ``per_host`` and return their mesh.

        ``bootstrap_command`` (a BootstrapCommand or a callable of the point) sets each proc's
        command and env, e.g. ``CUDA_VISIBLE_DEVICES``. ``bootstrap`` runs in every proc before
        any actor, e.g. ``partial(torch.cuda.set_per_process_memory_fraction, 0.3)``.
        Returns once every proc is up and bootstrapped; raises with the cause otherwise.
        """
        shape = Shape.from_sizes(dict(per_host or {}))
        name = name or f"procs{next(_names)}"
        labels = proc_labels(name, shape)
        token = secrets.token_hex(32)
        procs = LocalProcs(name, list(shape.points()), labels, bootstrap_command, token)
        addresses = procs.start()
        group = ProcGroup(name, addresses, token.encode(), labels, owner=procs)
        procs.watch(group.peers)
        mesh = ProcMesh(group, shape)
        try:
            for peer in group.peers:
                peer.connect()
            if bootstrap is not None:
                mesh.run(bootstrap).get()
        except BaseException:
            mesh.stop()
            raise
        return mesh


def this_host() -> HostMesh:
    """This machine, as a host mesh of one host (inside an actor: the actor's machine)."""
    return HostMesh()


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


def _serve_in_process() -> ProcMesh:
    from mesh_client._src.server.dispatch import ProcServer

    token = secrets.token_hex(32).encode()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    host, port = listener.getsockname()
    group = ProcGroup("client", [(host, port)], token, ["client[0]"])
    mesh = ProcMesh(group, Shape([], []))
    server = ProcServer(listener, token, identity={"mesh": "client", "rank": 0}, on_stop=lambda: None, this_proc=mesh)
    server.start()
    return mesh
