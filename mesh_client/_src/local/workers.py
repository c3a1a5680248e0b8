"""Monarch's worker bootstrap over our authenticated wire: ``run_worker_loop_forever`` on each
host, ``attach_to_workers`` in the controller.

A worker is a proc server (:mod:`mesh_client._src.server.main`) listening where ``address``
says; any running proc server is one, so the pods of a ProcMesh are workers as they are. The
controller's :class:`WorkerHostMesh` ships a small :class:`HostAgent` actor to every worker;
``spawn_procs`` asks each agent to start that host's procs next to it (with
:class:`~mesh_client._src.local.launcher.LocalProcs`) and joins their addresses into one proc
mesh of extent ``{"hosts": n, **per_host}``. Monarch secures workers with TLS (not implemented
there for custom CAs either); here every connection is authenticated with the mesh token, which
both sides take from ``PROCMESH_TOKEN`` (or the ``token`` argument).
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import pathlib
import secrets
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from mesh_client._src.actor import spawns
from mesh_client._src.actor.actor import Actor
from mesh_client._src.actor.actor_mesh import gather
from mesh_client._src.actor.endpoint import endpoint
from mesh_client._src.actor.owned_hosts import OwnedHostMesh
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.local.bootstrap import default_bootstrap_cmd
from mesh_client._src.local.host_mesh import connected_mesh, proc_displays
from mesh_client._src.local.launcher import LocalProcs
from mesh_client._src.runtime import futures, offloading
from mesh_client._src.runtime.futures import Future
from mesh_client._src.server import logging_mode

TRUST_ALL = "trust_all_connections"
# Monarch's types for its TLS material; only TRUST_ALL and no key are accepted here.
PrivateKey = bytes | pathlib.Path | None
CA = bytes | pathlib.Path | Literal["trust_all_connections"]
_names = itertools.count()


def parse_address(address: str) -> tuple[tuple[str, int], tuple[str, int]]:
    """``(dial, bind)`` from ``tcp://host:port``, ``<proc-id>@tcp://host:port`` or
    ``tcp://advertised:port@tcp://bind:port`` (Monarch's forms; ``host:port`` works too)."""
    parts = [p for p in address.split("@") if p]
    urls = [p for p in parts if "://" in p or ":" in p and "<" not in p]
    if not urls:
        raise ValueError(f"worker address {address!r} has no host:port; write it as tcp://host:port")
    dial = _host_port(urls[0], address)
    bind = _host_port(urls[-1], address) if len(urls) > 1 else dial
    return dial, bind


def _host_port(url: str, whole: str) -> tuple[str, int]:
    scheme, sep, rest = url.rpartition("://")
    if sep and scheme not in ("tcp", "tcp4", "tcp6"):
        raise ValueError(f"worker address {whole!r}: only tcp:// is supported here (procmesh's wire is TCP with a token)")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"worker address {whole!r}: expected host:port after tcp://")
    host = host.strip("[]")
    return ("0.0.0.0" if host == "*" else host), int(port)


def _token(token: str | bytes | None) -> bytes:
    value = token if token is not None else os.environ.get("PROCMESH_TOKEN")
    if not value:
        raise ValueError(
            "no mesh token: set PROCMESH_TOKEN (the same value on the workers and the controller) or pass token=; "
            "procmesh never serves or dials unauthenticated"
        )
    return value.encode() if isinstance(value, str) else value


def _check_security(ca: CA, private_key: PrivateKey) -> None:
    if private_key is not None or ca != TRUST_ALL:
        raise NotImplementedError(
            "TLS keys and CAs are not supported: pass ca='trust_all_connections'; connections are "
            "authenticated with the mesh token (PROCMESH_TOKEN) instead"
        )


def _serve(ca: CA, address: str, private_key: PrivateKey, token: str | bytes | None) -> Callable[[bool], int]:
    """A checked worker's serve (imported here: a controller never loads the proc server)."""
    from mesh_client._src.server import config as config_mod
    from mesh_client._src.server import main as server_main

    _check_security(ca, private_key)
    _, (host, port) = parse_address(address)
    cfg = config_mod.ServerConfig(host=host, port=port, token=_token(token), mesh="worker")
    return lambda finalize: server_main.serve(cfg, finalize=finalize)


def run_worker_loop_forever(*, ca: CA, address: str, private_key: PrivateKey = None, token: str | bytes | None = None) -> None:
    """Serve as a worker at ``address`` until it is stopped (SIGTERM, or ``shutdown()`` of the
    host mesh attached to it), then end this process, as Monarch's does (its atexit handlers and
    module finalizers run first, as in a proc)."""
    code = _serve(ca, address, private_key, token)(True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_worker_loop_until_shutdown(*, ca: CA, address: str, private_key: PrivateKey = None,
                                   token: str | bytes | None = None) -> None:
    """Serve as a worker at ``address`` until it is stopped (``shutdown()`` of the host mesh
    attached to it, or SIGTERM), then return to the program, as Monarch's after its host
    drained: its port and every connection to it are closed and its actors and the procs they
    started are stopped, so the program can start another worker or exit cleanly."""
    _serve(ca, address, private_key, token)(False)


def start_worker_loop_forever(*, ca: CA, address: str, private_key: PrivateKey = None,
                              token: str | bytes | None = None) -> Future[None]:
    """Start serving as a worker at ``address`` on a thread of its own and return at once; the
    future completes when the worker is stopped (``shutdown()`` of the host mesh attached to
    it), as Monarch's. SIGTERM keeps its usual effect on the process (it ends it)."""
    serve_until_stopped = _serve(ca, address, private_key, token)
    done: Future[None] = Future(None)

    def serve() -> None:
        try:
            serve_until_stopped(False)
        except BaseException as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=serve, name="procmesh worker loop", daemon=True).start()
    return done


class HostAgent(Actor):
    """Runs in a worker: starts and stops the procs of that host."""

    def __init__(self) -> None:
        self.procs: dict[str, LocalProcs] = {}

    @endpoint
    def start_procs(self, name: str, per_host: dict[str, int], host_index: int, token: str, advertise: str
                    ) -> list[tuple[tuple[str, int], str]]:
        """Start the procs; each one's advertised address and incarnation id (wire/binding.py)."""
        shape = Shape.from_sizes(per_host)
        displays = [f"{name}[hosts={host_index}{''.join(f',{k}={v}' for k, v in p.items())}]" for p in shape.points()]
        bind = advertise if _is_ip(advertise) else "0.0.0.0"  # an IP is this host's own (a pod's IP is the pod's)
        command = default_bootstrap_cmd().with_env({"PROCMESH_LISTEN_HOST": bind})
        procs = LocalProcs(name, list(shape.points()), displays, command, token)
        addresses = procs.start()
        self.procs[name] = procs
        return [((advertise, port), proc_id) for (_, port), proc_id in zip(addresses, procs.proc_ids)]

    @endpoint
    def stop_procs(self, name: str, reason: str) -> None:
        procs = self.procs.pop(name, None)
        if procs is not None:
            procs.stop(range(len(procs.processes)), reason)

    def __cleanup__(self, exc: BaseException | None) -> None:
        """The agent ends (its controller let go of this worker, or the worker loop ended): the
        procs it started end with it, so a worker loop that returned leaves none running."""
        while self.procs:
            name, procs = self.procs.popitem()
            procs.stop(range(len(procs.processes)), "the worker's host agent stopped")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class _WorkerProcs:
    """The owner of a proc mesh spawned on workers: its agents stop the procs."""

    def __init__(self, agents: HostAgent, name: str) -> None:
        self.agents = agents
        self.name = name

    def stop(self, indices: Sequence[int], reason: str) -> None:
        self.agents.stop_procs.call(self.name, reason).get()  # the whole mesh: its procs share hosts

    def logging_mode(self, stream_to_client: bool, level: int) -> Callable[[], None]:
        """ProcMesh.logging_option: the level only. These procs print to their worker's
        terminal; nothing carries their lines here."""
        if stream_to_client:
            raise NotImplementedError(
                "procs spawned on attach_to_workers hosts print to their worker's terminal and procmesh does not "
                "stream them to the client: read the workers' output there, or call logging_option(stream_to_client=False)")
        return functools.partial(logging_mode.apply, level, None)


class WorkerHostMesh(MeshTrait, OwnedHostMesh):
    """Hosts that run the worker loop, as one mesh of extent ``{"hosts": n}``. Owned, as
    Monarch's ``attach_to_workers`` mesh: ``stop()`` lets go of the workers (it spawns again,
    through new agents), ``shutdown()`` ends them, and refuses anything after (RuntimeError);
    ``async with hosts:`` shuts it down at the end of the block."""

    def __init__(self, name: str, workers: Sequence[tuple[str, int]], token: bytes) -> None:
        self._shape = Shape(["hosts"], [len(workers)])
        self.name = name
        displays = [f"{name}[hosts={i}] ({h}:{p})" for i, (h, p) in enumerate(workers)]
        self._workers = ProcMesh(ProcGroup(name, workers, token, displays), self._shape)
        self._first_agents = self._workers.spawn("host_agent", HostAgent)
        # The agents spawn_procs starts procs with; pending while a spawn_procs ships new ones
        # (the others wait on it). Never held across a network wait: a stop from a done
        # callback on the I/O thread, which delivers the agents' replies, takes the lock.
        self._agents: Future[HostAgent] = futures.completed(self._first_agents)
        self._spawns = spawns.Spawns()  # what stop() and shutdown() stop first, spawns in flight too
        self._agents_lock = threading.Lock()  # guards the two agents fields
        self._agents_stopped = False  # by stop(): the next spawn_procs ships new ones

    def _with_shape(self, shape: Shape) -> WorkerHostMesh:
        raise NotImplementedError("slicing a worker host mesh is not supported; attach to fewer workers")

    def __repr__(self) -> str:
        return f"<WorkerHostMesh {self.name!r} hosts={len(self._shape)}>"

    @property
    def initialized(self) -> Future[Literal[True]]:
        """Done, with True as Monarch's, once every worker answered (raises if one cannot be reached)."""
        return gather([self._first_agents.initialized], lambda values: True)

    def spawn_procs(
        self,
        per_host: Mapping[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
    ) -> ProcMesh:
        """Start ``per_host`` procs on every worker; their mesh is ``{"hosts": n, **per_host}``."""
        Shape.from_sizes({} if per_host is None else per_host)  # refused here, not in every worker
        per_host = dict(per_host or {})
        if "hosts" in per_host:
            raise ValueError("per_host must not name 'hosts': it is the workers' dimension")
        spawn = self._spawns.begin()  # before the agents are picked: a stop then waits for this spawn
        if spawn is None:
            raise self._shut_down_error()
        try:
            mesh = self._start(per_host, bootstrap, name)
        except BaseException:
            self._spawns.end(spawn, None)
            raise
        late = self._spawns.end(spawn, mesh)
        if late:  # stop() or shutdown() came while this spawn started its procs: theirs to stop
            self._spawns.stop_late(spawn, late, mesh, self._stop_reason())
            if self._spawns.shut_down:
                raise self._shut_down_error()
            raise RuntimeError(f"{self!r}.stop() came while this spawn started its procs, so they were stopped as "
                               f"stop() stops what the host mesh spawned; spawn again")
        return mesh

    def _start(self, per_host: dict[str, int], bootstrap: Callable[[], Any] | None, name: str | None) -> ProcMesh:
        """The body of :meth:`spawn_procs`: every agent starts its host's procs, then connect."""
        agents = self._live_agents()
        name = name or f"{self.name}-procs{next(_names)}"
        token = secrets.token_hex(32)
        advertised = [h for h, _ in self._workers._group.addresses]
        per_worker = [
            agents.slice(hosts=i).start_procs.call_one(name, per_host, i, token, advertised[i]) for i in range(len(advertised))
        ]
        started = [a for fut in per_worker for a in fut.get()]
        shape = Shape(["hosts", *per_host], [len(advertised), *per_host.values()])
        group = ProcGroup(name, [a for a, _ in started], token.encode(), proc_displays(name, shape),
                          owner=_WorkerProcs(agents, name), proc_ids=[p for _, p in started])
        return connected_mesh(group, shape, bootstrap)

    def _live_agents(self) -> HostAgent:
        """The agents to start procs with: new ones after :meth:`stop` (Monarch's host mesh
        spawns again after its ``stop()``), shipped by the first caller outside the lock (with
        ``options.spawn_waits`` the spawn waits for the workers' replies), the others waiting
        for that spawn; one that failed is tried again by the next caller."""
        with self._agents_lock:
            shipping = self._agents_stopped
            if shipping:
                self._agents, self._agents_stopped = Future(None), False
            agents = self._agents
        if shipping:
            try:
                agents.set_result(self._workers.spawn("host_agent", HostAgent))
            except BaseException as exc:
                with self._agents_lock:
                    if self._agents is agents:  # no stop since: the next spawn_procs ships again
                        self._agents_stopped = True
                agents.set_exception(exc)
                raise
        return agents.get()

    def stop(self, reason: str = "stopped by client") -> Future[None]:
        """Let go of the workers (they keep running, for the next controller to attach, and for
        this host mesh's next ``spawn_procs``); the procs they started for this host mesh stop
        first, as asked (so their actors' ends are no supervision events), those of the spawns
        in flight once started (the spawn then raises, as Monarch drains them), then the agents.
        The future completes after a stop or shutdown called before this one, too;
        ``await hosts.stop()`` leaves the event loop free meanwhile. After :meth:`shutdown` the
        future raises RuntimeError, as Monarch's."""
        with self._agents_lock:  # before the take: a spawn that picked these agents began before it, so is waited for
            agents, self._agents_stopped = self._agents, True
        taken = self._spawns.take(shutdown=False)
        if taken is None:
            return self._spawns.refusal(self._shut_down_error())
        return self._after_spawned(taken, reason, functools.partial(_stop_agents, agents, reason))

    def shutdown(self) -> Future[None]:
        """Stop the worker processes themselves (they cannot be attached to again), after the
        procs they started for this host mesh, those of the spawns in flight too. Once only: a
        later ``shutdown()``, ``stop()`` or ``spawn_procs`` raises Monarch's RuntimeError
        (``stop()``'s and ``shutdown()``'s futures raise it)."""
        taken = self._spawns.take(shutdown=True)
        if taken is None:
            return self._spawns.refusal(self._shut_down_error())
        return self._end_workers(taken)

    def _stop_reason(self) -> str:
        return "host mesh shut down" if self._spawns.shut_down else "host mesh stopped"

    def _is_shut_down(self) -> bool:
        return self._spawns.shut_down

    def _shut_down_error(self) -> RuntimeError:
        return RuntimeError(f"HostMesh has already been shut down: {self!r}.shutdown() was called, which ended "
                            "its workers; start workers again and attach_to_workers() to spawn more procs")

    def _shutdown_once(self) -> Future[None]:
        taken = self._spawns.shutdown_once()
        return taken if isinstance(taken, Future) else self._end_workers(taken)  # a Future: the shutdown under way

    def _end_workers(self, taken: tuple[list[ProcMesh], spawns.Stopping]) -> Future[None]:
        return self._after_spawned(taken, "host mesh shut down", lambda: self._workers.stop("host mesh shut down"))

    def _after_spawned(self, taken: tuple[list[ProcMesh], spawns.Stopping], reason: str,
                       then: Callable[[], Future[None]]) -> Future[None]:
        """Stop the proc meshes spawned here that are still up, as ``ProcMesh.stop`` does (the
        connections that then close are expected: without it the agents' ends took the procs
        down under live actors, an unhandled supervision event that ended the controller), and
        wait for the spawns in flight to stop theirs (the agents' ends took those procs down
        under their bootstrap) and for a stop called before this one, then ``then()``, whatever
        became of them; the future raises the first failure. The blocking work goes off the
        event loop (``await hosts.stop()`` leaves it free)."""
        spawned, stopping = taken
        finished = self._spawns.finish(stopping, then)
        offloading.off_the_loop(functools.partial(self._spawns.stop_own, stopping, spawned, reason),
                                name="procmesh-host-stop")
        return finished


def _stop_agents(agents: Future[HostAgent], reason: str) -> Future[None]:
    """A stop's last step: end the agents it took. Their spawn is over by then (it began before
    the stop's take, which waited for it), so this does not wait; none to end if it failed."""
    if agents.exception() is not None:
        return futures.completed(None)
    return agents.get().stop(reason)


def attach_to_workers(
    *,
    ca: CA,
    workers: Sequence[str | Future[str]],
    name: str | None = None,
    private_key: PrivateKey = None,
    token: str | bytes | None = None,
) -> WorkerHostMesh:
    """A host mesh of running workers (``tcp://host:port`` each, or futures of such strings)."""
    _check_security(ca, private_key)
    dials = [parse_address(w.get() if isinstance(w, Future) else w)[0] for w in workers]
    return WorkerHostMesh(name or f"workers{next(_names)}", dials, _token(token))
