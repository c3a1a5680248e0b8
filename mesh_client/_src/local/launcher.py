"""Starting, watching and stopping proc server processes on this machine.

Each proc gets the mesh token in its environment, reports its address on a private pipe, and
holds a lifeline (its stdin) to this process: if the controller dies, its procs exit too. Each
is also given this controller's private directory of unix sockets (:mod:`.rundirs`), so local
clients reach it over AF_UNIX; the socket files of procs that stop are removed here. A proc
that dies stays dead until ``ProcMesh.reconnect``/``respawn`` asks :meth:`LocalProcs.revive`
for a new one in its place (:mod:`mesh_client._src.actor.restarts`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from mesh_client._src import contract
from mesh_client._src.actor import restarts
from mesh_client._src.actor.procs import Revived
from mesh_client._src.actor.shape import Point
from mesh_client._src.local import rundirs, zygote_client
from mesh_client._src.local.bootstrap import BootstrapCommand, default_bootstrap_cmd
from mesh_client._src.runtime import ops, peers, unixlinks
from mesh_client._src.server import logging_mode, output

DEFAULT_START_TIMEOUT = 120.0


def start_timeout() -> float:
    """``PROCMESH_START_TIMEOUT`` as it is when procs start (set after import, it counts too)."""
    text = os.environ.get("PROCMESH_START_TIMEOUT", "")
    try:
        return float(text) if text else DEFAULT_START_TIMEOUT
    except ValueError:
        raise ValueError(f"PROCMESH_START_TIMEOUT={text!r}: give the seconds procs may take to start, "
                         f"e.g. 120") from None
STOP_TIMEOUT = 5.0
#: How long ``revive`` waits for the exit status of a proc whose connection dropped.
LOST_EXIT_SECONDS = 5.0

#: What a failed call on a dead local proc adds: the way on (the local backend restarts nothing).
NO_RESTARTS = f"the local backend restarts no proc by itself: {restarts.WAY_ON} (either starts a new proc in its place)"
#: What it adds while ``spawn_procs`` has not returned: there is no mesh to respawn yet.
NO_MESH_YET = "spawn_procs stops the mesh's other procs and raises: fix what ended this one and call spawn_procs again"

CommandSpec = BootstrapCommand | Callable[[Point], BootstrapCommand] | None


class ProcStartError(RuntimeError):
    """A proc exited or stayed silent before it was ready."""


def explain_exit(returncode: int | None) -> str:
    """'exited with code 3', 'killed by SIGKILL', or 'still running'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _command_line(args: object) -> str:
    return " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)


class LocalProcs:
    """The processes of one local proc mesh (the ``owner`` of its ProcGroup)."""

    def __init__(self, name: str, points: Sequence[Point], displays: Sequence[str], command: CommandSpec, token: str,
                 prefixes: Sequence[str] | None = None) -> None:
        """``prefixes``: what each proc puts before every line it prints (server/output.py);
        None: bare lines."""
        self.name = name
        self.displays = list(displays)
        self._prefixes = list(prefixes) if prefixes is not None else None
        self.token = token
        self._points = list(points)
        self._command = command
        self.processes: list[subprocess.Popen[bytes] | zygote_client.ForkedProc] = []
        self.addresses: list[tuple[str, int]] = []
        # Each process's incarnation id, drawn here as it is started (contract.INCARNATION): the
        # proc its clients' handshakes name, so a later holder of its port cannot relay them.
        self.proc_ids: list[str] = [""] * len(self._points)
        self.restarts = [0] * len(self._points)  # new processes started in each one's place
        self._stopped: dict[int, str] = {}  # procs stopped on purpose, alive when asked: the reason
        self.spawned = False  # spawn_procs returned the mesh: from then on a dead proc is respawned
        self._peers: Sequence[peers.Peer] = []
        _live.add(self)

    def start(self) -> list[tuple[str, int]]:
        """Launch every proc and wait until each reports its address."""
        try:
            self.processes = [None] * len(self._points)  # type: ignore[list-item]  # filled below
            started = self._start(range(len(self._points)))
        except BaseException:
            self.kill()
            raise
        self.addresses = [started[i] for i in range(len(self._points))]
        return self.addresses

    def _start(self, indices: Sequence[int]) -> dict[int, tuple[str, int]]:
        """Launch procs ``indices`` in their slots of ``processes``; their addresses once ready."""
        readers: dict[int, int] = {}
        try:
            for index in indices:
                self._stopped.pop(index, None)
                fd = self._launch(index, self._points[index])
                if fd is not None:
                    readers[fd] = index
            return self._await_ready(readers, indices)
        finally:
            for fd in readers:
                os.close(fd)

    def revive(self, indices: Sequence[int]) -> Mapping[int, Revived]:
        """A new process in place of each dead one of ``indices``; a live one whose connection
        dropped is reached again where it is."""
        for i in indices:  # a lost proc's exit status may lag its connection (the zygote reports it)
            if i < len(self._peers) and self._peers[i].lost:
                try:
                    self.processes[i].wait(timeout=LOST_EXIT_SECONDS)
                except subprocess.TimeoutExpired:
                    pass  # alive after all: reached again at its address
        dead = [i for i in indices if self.processes[i].poll() is not None]
        out = {i: Revived(self.addresses[i], False, self.proc_ids[i]) for i in indices
               if i not in dead and i < len(self._peers) and self._peers[i].lost}
        if dead:
            _live.add(self)
            self._bury_sockets(dead)
            for i, address in self._start(dead).items():
                self.addresses[i] = address
                self.restarts[i] += 1
                out[i] = Revived(address, True, self.proc_ids[i])
        return out

    def restart_note(self, index: int) -> str:
        return f"restart {self.restarts[index]} of this proc, by reconnect() or respawn()"

    def _launch(self, index: int, point: Point) -> int | None:
        """Start proc ``index`` in its slot; returns the read end of its ready pipe, or None if forked."""
        spec = self._command
        cmd = spec(point) if callable(spec) else (spec or default_bootstrap_cmd())
        if not isinstance(cmd, BootstrapCommand):
            raise TypeError(f"bootstrap_command must give a BootstrapCommand, got {type(cmd).__name__}")
        env = cmd.environment(os.environ)
        self.proc_ids[index] = uuid.uuid4().hex
        proc_env = contract.ProcEnv(
            port=0,
            listen_host=env.get(contract.LISTEN_HOST, "127.0.0.1"),
            token=self.token,
            mesh=self.name,
            rank=index,
            coords=dict(point),
            sys_path=tuple(p for p in sys.path if p),
            incarnation=self.proc_ids[index],
        )
        env.update(proc_env.render())
        env.pop(unixlinks.DIR_ENV, None)  # this controller's, not one the user's env names
        env.update(rundirs.environment())
        env.pop(output.PREFIX_ENV, None)  # a proc that starts procs: its own prefix is not theirs
        if self._prefixes is not None:
            env[output.PREFIX_ENV] = self._prefixes[index]
        if zygote_client.eligible(cmd.argv(), cmd.program, default_bootstrap_cmd().argv(), cmd.env, cmd.inherit_env):
            self.processes[index] = zygote_client.get_zygote().fork(env)
            return None
        read_fd, write_fd = os.pipe()
        env.update(dataclasses.replace(proc_env, ready_fd=write_fd, lifeline=True).render())
        try:
            proc = subprocess.Popen(cmd.argv(), executable=cmd.program, env=env, stdin=subprocess.PIPE, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        self.processes[index] = proc
        return read_fd

    def _await_ready(self, readers: dict[int, int], indices: Sequence[int]) -> dict[int, tuple[str, int]]:
        addresses: dict[int, tuple[str, int]] = {}
        buffers = {fd: b"" for fd in readers}
        waiting = set(readers)
        forked = [i for i in indices if isinstance(self.processes[i], zygote_client.ForkedProc)]
        timeout = start_timeout()
        deadline = time.monotonic() + timeout
        while waiting or forked:
            left = deadline - time.monotonic()
            if left <= 0:
                stuck = [self.displays[readers[fd]] for fd in waiting] + [self.displays[i] for i in forked]
                raise ProcStartError(f"procs {stuck} did not report ready within {timeout:g} s (PROCMESH_START_TIMEOUT)")
            for i in list(forked):
                proc = self.processes[i]
                assert isinstance(proc, zygote_client.ForkedProc)
                if proc.address is not None:
                    host, _, port = proc.address.rpartition(":")
                    addresses[i] = (host, int(port))
                    forked.remove(i)
                elif proc.returncode is not None:
                    self._failed_start(i)
            if not waiting:
                if not forked:
                    break
                zygote = zygote_client.get_zygote()
                with zygote.changed:
                    zygote.changed.wait(min(left, 0.5))
                continue
            ready, _, _ = select.select(list(waiting), [], [], min(left, 0.005) if forked else left)
            for fd in ready:
                chunk = os.read(fd, 256)
                index = readers[fd]
                if not chunk:
                    self._failed_start(index)
                buffers[fd] += chunk
                if buffers[fd].endswith(b"\n"):
                    host, _, port = buffers[fd].decode().strip().rpartition(":")
                    addresses[index] = (host, int(port))
                    waiting.discard(fd)
        return addresses

    def _failed_start(self, index: int) -> None:
        proc = self.processes[index]
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        raise ProcStartError(
            f"proc {self.displays[index]} {explain_exit(proc.returncode)} before it was ready "
            f"(command: {_command_line(proc.args)}); its error output is above"
        )

    def watch(self, group_peers: Sequence[peers.Peer]) -> None:
        """Let failed calls say how each proc died."""
        self._peers = group_peers  # the group's own list: a reconnect replaces peers in it
        for index, peer in enumerate(group_peers):
            peer.explain_loss = lambda reason, deadline, i=index: self.explain(i, reason, deadline)

    def explain(self, index: int, reason: str, deadline: float) -> str:
        """How proc ``index`` ended, if its exit status is known by ``deadline``
        (time.monotonic()); a forked proc's comes from the zygote, which may lag under load."""
        proc = self.processes[index]
        if index in self._stopped:  # not a failure, and nothing to respawn
            return (f"proc {self.displays[index]} (pid {proc.pid}) was stopped ({self._stopped[index]}): "
                    f"the actor mesh is stopped due to proc mesh shutdown")
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return (f"lost the connection to proc {self.displays[index]} (pid {proc.pid}; its exit "
                    f"status was not known yet): {reason}; {self._way_on()}")
        self._bury_sockets([index])  # ended: its mesh's other clients must not dial its port now
        code = proc.returncode
        monarch = f"Killed(sig={-code}): " if code is not None and code < 0 else ""  # Monarch's words first
        zygote = proc.lost_with_zygote if isinstance(proc, zygote_client.ForkedProc) else None
        if zygote is not None:
            return (f"{monarch}proc {self.displays[index]} (pid {proc.pid}) ended with the zygote that "
                    f"forked it (pid {zygote[0]}: {explain_exit(zygote[1])}): the kernel "
                    f"ends a forked proc with SIGTERM when its zygote goes; {self._way_on()}")
        return f"{monarch}proc {self.displays[index]} (pid {proc.pid}) {explain_exit(code)}; {self._way_on()}"

    def _way_on(self) -> str:
        return NO_RESTARTS if self.spawned else NO_MESH_YET

    def logging_mode(self, stream_to_client: bool, level: int) -> Callable[[], None]:
        """ProcMesh.logging_option: the procs lead their lines with their prefix, or not (and so
        will procs started in a dead one's place); what each proc runs."""
        self._prefixes = [output.proc_prefix(self.name, i) for i in range(len(self._points))] if stream_to_client else None
        return functools.partial(logging_mode.apply, level, stream_to_client)

    def stop(self, indices: Sequence[int], reason: str) -> None:
        """Ask the procs to stop, then make sure they are gone."""
        asked = []
        for i in indices:
            if self.processes[i].poll() is None:
                self._stopped[i] = reason
            if i < len(self._peers) and self.processes[i].poll() is None and not self._peers[i].lost:
                asked.append(self._peers[i].request((ops.STOP, reason), (), lambda raw: None))
            elif self.processes[i].poll() is None:
                # No link of ours to it (a worker host's launcher: its controller holds the links):
                # SIGTERM stops a proc as STOP does (actors' __cleanup__, then its finalizers).
                # A forked proc has no lifeline pipe whose end would tell it.
                with contextlib.suppress(OSError):
                    self.processes[i].send_signal(signal.SIGTERM)
        for fut in asked:
            try:
                fut.get(timeout=STOP_TIMEOUT)
            except Exception:
                pass
        deadline = time.monotonic() + STOP_TIMEOUT
        for i in indices:
            proc = self.processes[i]
            if proc.stdin:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print(f"procmesh: proc {self.displays[i]} (pid {proc.pid}) had not ended {STOP_TIMEOUT:g} s after it "
                      f"was asked to stop ({reason}), so it was killed (SIGKILL): something in it outlived its "
                      f"actors (an atexit handler, a thread that is not a daemon, a finalizer) and did not finish",
                      file=sys.stderr, flush=True)
        for i in indices:
            if i < len(self._peers):
                peers.forget_peer(self._peers[i])
        self._bury_sockets(indices)
        if all(p.poll() is not None for p in self.processes):
            _live.discard(self)

    def kill(self) -> None:
        started = [proc for proc in self.processes if proc is not None]  # a failed start leaves holes
        for proc in started:
            if proc.poll() is None:
                proc.kill()
        for proc in started:
            proc.wait()
        self._bury_sockets(range(len(self.addresses)))
        _live.discard(self)

    def _bury_sockets(self, indices: Iterable[int]) -> None:
        """Bury the unix socket files of procs ``indices``, which have ended (a proc buries its
        own when it stops; one that was killed cannot), unless a newer proc listens there."""
        for i in indices:
            if i < len(self.addresses) and self.processes[i].poll() is not None:
                unixlinks.bury_stale(self.addresses[i], self.token.encode())


_live: set[LocalProcs] = set()


@atexit.register
def _stop_all() -> None:
    """Leave no proc behind when the controller exits."""
    for procs in list(_live):
        try:
            procs.stop(range(len(procs.processes)), "controller exiting")
        except Exception:
            procs.kill()
