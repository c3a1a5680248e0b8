"""``SPMDActor`` and ``setup_torch_elastic_env``: run torchrun-style programs on a proc mesh."""

from __future__ import annotations

import functools
import os
import random
import runpy
import socket
import sys
from collections.abc import Callable

from mesh_client._src.actor.actor import Actor
from mesh_client._src.actor.context import context, current_rank
from mesh_client._src.actor.endpoint import endpoint
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.spmd import addresses, jobs, process_groups, rendezvous
from mesh_client._src.spmd.addresses import AddrType
from mesh_client._src.spmd.elastic_env import torchelastic_env


def _proc_ip() -> str:
    """This proc's IP: the address its proc server listens on (a pod IP on Kubernetes)."""
    proc = context().actor_instance.proc
    host = proc._group.addresses[0][0] if proc is not None else ""
    if host and host not in ("0.0.0.0", "::"):
        return host
    return socket.gethostbyname(socket.gethostname())


#: Where master ports are looked for when the kernel's ephemeral range is known: below it, so
#: that no outgoing connection of any process can take the port between this pick and the
#: TCPStore's bind on rank 0 (a port from bind(0) is an ephemeral one: that race was seen, and
#: the other ranks then waited for the store for torch's 30-minute timeout).
MASTER_PORT_FLOOR = 20000
PICK_ATTEMPTS = 64


def _ephemeral_low() -> int | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = _ephemeral_low()
    if low is not None and low > MASTER_PORT_FLOOR:
        for _ in range(PICK_ATTEMPTS):
            port = random.randrange(MASTER_PORT_FLOOR, low)
            with socket.socket(family) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue  # a listener has it: try another
                return port
    with socket.socket(family) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SPMDActor(Actor):
    """Sets torchrun's worker environment from its place in the mesh, and runs SPMD scripts.

    Ranks come from the point the actor was spawned at; the last dimension is local and the
    ``hosts`` dimension forms the groups. ``store_timeout``: the most seconds a rank's
    ``env://`` rendezvous waits for its peers (:mod:`.rendezvous`; None: the proc's
    ``PROCMESH_SPMD_STORE_TIMEOUT_SECONDS``, else 300; 0: torch's own 30 minutes).
    ``run_id``, ``restart_count``, ``max_restarts`` (TORCHELASTIC_*): None takes the proc
    mesh's, so an actor spawned as Monarch's (no arguments) sees the ProcMesh's restarts.
    """

    def __init__(self, run_id: str | None = None, restart_count: int | None = None, max_restarts: int | None = None,
                 store_timeout: float | None = None) -> None:
        point = current_rank()
        self._coords = dict(point)
        self._labels = list(point.extent.labels)
        self._sizes = list(point.extent.sizes)
        me = context().actor_instance
        self._actor_id, self._name = me.actor_id, me.name
        # None: the proc mesh's, as the client knew them at this (re)spawn: on Kubernetes the
        # ProcMesh's status.restarts and spec.maxRestarts (a respawn after a restart sees 1).
        known = (me.proc_mesh._elastic() if me.proc_mesh is not None else None) or (me.actor_id, 0, 0)
        self._run_id = run_id or known[0]
        self._restart_count = known[1] if restart_count is None else restart_count
        self._max_restarts = known[2] if max_restarts is None else max_restarts
        self._store_timeout = rendezvous.configured(store_timeout)

    @endpoint
    def get_host_port(self, use_ipaddr: AddrType | None = None) -> tuple[str, int]:
        """This proc's address and a port that was free on it (the master, when called on rank 0).

        ``use_ipaddr``: None for the address its proc server listens on, else an IP of that
        family (:func:`~mesh_client._src.spmd.addresses.master_address`).
        """
        own = _proc_ip()
        host = addresses.master_address(own, socket.gethostname(), use_ipaddr)
        return host, _free_port(own)

    @endpoint
    def setup_env(self, master_addr: str, master_port: int) -> dict[str, str]:
        """Set the torchelastic variables in this proc (later actors in the proc see them too);
        refused while another actor's SPMD job runs here (:mod:`.jobs`)."""
        env = torchelastic_env(
            self._coords,
            self._labels,
            self._sizes,
            master_addr=master_addr,
            master_port=int(master_port),
            run_id=self._run_id,
            restart_count=self._restart_count,
            max_restarts=self._max_restarts,
        )
        with jobs.free(self._actor_id, f"cannot set the torchelastic environment for {self._name!r}"):
            os.environ.update(env)  # no job starts meanwhile: it would read this half written
            rendezvous.bound_store_timeout(self._store_timeout)
        return env

    @endpoint
    def main(self, master_addr: str, master_port: int, script_args: list[str]) -> bool:
        """Run ``["-m", module, *args]`` or ``[script, *args]`` here, as torchrun would.

        The default process group the script made ends with it, once its result is sent (as
        its process would under torchrun: :mod:`.process_groups`); one made before ``main``
        is left alone. One job runs in a proc at a time: another actor's ``main`` here meanwhile
        raises :class:`~.jobs.JobRunning` (:mod:`.jobs`)."""
        if not script_args:
            raise ValueError('script_args is empty: give ["-m", "module", ...] or ["script.py", ...]')
        me = self._actor_id
        jobs.claim(me, f"{self._name!r} ({' '.join(script_args)})")
        saved = sys.argv
        owns_group = not process_groups.initialized()
        try:
            self.setup_env(master_addr, master_port)
            self._run(script_args)
        except SystemExit as exc:  # a script ending with sys.exit(): success only for 0 / None
            if exc.code not in (None, 0):
                raise RuntimeError(f"{' '.join(script_args)} exited with code {exc.code}") from exc
        finally:
            sys.argv = saved
            if owns_group:  # the proc is held until the group is gone: the next job never meets it
                jobs.ending(me)
                _after_reply(functools.partial(_end_job, me))
            else:
                jobs.release(me)
        return True

    @staticmethod
    def _run(script_args: list[str]) -> None:
        if script_args[0] == "-m":
            if len(script_args) < 2:
                raise ValueError('"-m" needs a module name after it')
            sys.argv = [script_args[1], *script_args[2:]]
            runpy.run_module(script_args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(script_args)
            runpy.run_path(script_args[0], run_name="__main__")


def _after_reply(fn: Callable[[], None]) -> None:
    """Run ``fn`` on this actor's thread once the current call's result is sent."""
    lifecycle = context().actor_instance.lifecycle
    if lifecycle is None:  # not in an actor (SPMDActor used directly): nothing to wait for
        fn()
    else:
        lifecycle.run_next(fn)


def _end_job(actor_id: str) -> None:
    """End the group a job's script left (as its process's exit would), then free the proc."""
    process_groups.end()
    jobs.release(actor_id)


def _spawn(proc_mesh: ProcMesh, store_timeout: float | None) -> SPMDActor:
    # No elastic arguments: each proc reads them from the mesh, again at a respawn.
    return proc_mesh.spawn("_SPMDActor", SPMDActor, store_timeout=store_timeout)


def setup_torch_elastic_env(
    proc_mesh: ProcMesh, master_addr: str | None = None, master_port: int | None = None, use_ipaddr: AddrType | None = None,
    *, store_timeout: float | None = None,
) -> None:
    """Set torchrun's worker environment in every proc of ``proc_mesh``.

    Without a master, the proc at the all-zero point is the master: its address (``use_ipaddr``
    as in :meth:`SPMDActor.get_host_port`), and a port free there. ``store_timeout`` bounds
    each rank's wait for its peers in the rendezvous, as :class:`SPMDActor`'s.
    """
    if (master_addr is None) != (master_port is None):
        raise ValueError("give both master_addr and master_port, or neither")
    actors = _spawn(proc_mesh, store_timeout)
    if master_addr is None or master_port is None:
        first = actors.slice(**dict.fromkeys(proc_mesh._labels, 0))
        master_addr, master_port = first.get_host_port.call_one(use_ipaddr).get()
    actors.setup_env.call(master_addr, master_port).get()


async def setup_torch_elastic_env_async(
    proc_mesh: ProcMesh, master_addr: str | None = None, master_port: int | None = None, use_ipaddr: AddrType | None = None,
    *, store_timeout: float | None = None,
) -> None:
    """The same as :func:`setup_torch_elastic_env`, for async controllers."""
    if (master_addr is None) != (master_port is None):
        raise ValueError("give both master_addr and master_port, or neither")
    actors = _spawn(proc_mesh, store_timeout)
    if master_addr is None or master_port is None:
        first = actors.slice(**dict.fromkeys(proc_mesh._labels, 0))
        master_addr, master_port = await first.get_host_port.call_one(use_ipaddr)
    await actors.setup_env.call(master_addr, master_port)
