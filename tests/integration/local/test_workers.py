"""Monarch's worker bootstrap on this machine: processes that run ``run_worker_loop_forever``,
and a controller that attaches with ``attach_to_workers``.

Aspects: the attached host mesh spawns procs on every worker (started by the worker itself),
with extent hosts x per_host; actors there answer and supervision works as on any mesh; a wrong
token is refused, naming the worker that refused it; TLS arguments other than trust_all_connections say what to do instead. After
the host mesh's ``shutdown()``: ``run_worker_loop_forever`` ends the worker's process,
``run_worker_loop_until_shutdown`` returns to the program (its globals intact), and the future
of ``start_worker_loop_forever`` (which returned at once) completes; once
``run_worker_loop_until_shutdown`` returned, its port is closed, connections opened before are
closed and the procs it started are gone; ``logging_option`` can set
the level of procs on workers but not stream their output here; procs on workers stop when
asked, running their exit handlers (a forked one was killed 5 s later); the host mesh spawns
again after its ``stop()`` and refuses a second ``shutdown()``, a ``stop()`` and ``spawn_procs``
after its ``shutdown()``, as Monarch's; a spawn in flight when it stops or shuts down is drained
(its procs stopped once started, and it raises). An awaited ``stop()`` or ``shutdown()`` lets the
loop serve other tasks; two called at once from two threads both complete only once the procs
are gone; leaving ``async with`` while another block shuts the host mesh down waits for that
shutdown; a stop from a done callback while another thread ships new agents does not deadlock.
"""

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mesh_client import ProcMesh, attach_to_workers, options, run_worker_loop_forever, this_host
from mesh_client._src.runtime import handshaking, peers, streams
from mesh_client._src.wire import protocol
from tests.cluster import processes, testing
from tests.integration.local.actors import Lingering, Recorder

TOKEN = "a-test-token-for-workers"
WORKER = "from mesh_client.actor import run_worker_loop_forever; run_worker_loop_forever(address='tcp://127.0.0.1:0', ca='trust_all_connections')"


# Workers whose procs are given 60 s to end, not 5: a test holds a stop open until it lets it go.
PATIENT_WORKER = f"import mesh_client._src.local.launcher as launcher; launcher.STOP_TIMEOUT = 60.0; {WORKER}"


@pytest.fixture
def workers():
    yield from _workers(WORKER)


@pytest.fixture
def patient_workers():
    yield from _workers(PATIENT_WORKER)


def _workers(command: str):
    env = dict(os.environ, PROCMESH_TOKEN=TOKEN)
    procs = [subprocess.Popen([sys.executable, "-c", command], env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    addresses = []
    try:
        for proc in procs:
            line = proc.stderr.readline()  # the worker announces where it listens
            match = re.search(r"listening on (\S+)", line)
            assert match, f"worker said {line!r}"
            addresses.append((f"tcp://{match.group(1)}", proc.pid))
        yield addresses
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_attach_to_workers_spawns_procs_on_every_worker(workers, faults):
    hosts = attach_to_workers(name="w", ca="trust_all_connections", workers=[a for a, _ in workers], token=TOKEN)
    hosts.initialized.get(timeout=60)
    assert hosts.sizes == {"hosts": 2}
    with pytest.raises(TypeError, match=r"dimension 'gpus' has size 2.7; sizes are whole numbers"):
        hosts.spawn_procs(per_host={"gpus": 2.7})  # refused here, before any worker starts a proc
    mesh = hosts.spawn_procs(per_host={"gpus": 2})
    assert mesh.sizes == {"hosts": 2, "gpus": 2}
    where = mesh.spawn("rec", Recorder).where.call().get()
    worker_pids = [pid for _, pid in workers]
    started_by = {(p["hosts"], p["gpus"]): _worker_above(info["pid"], worker_pids) for p, info in where.items()}
    assert [started_by[(h, g)] for h in (0, 1) for g in (0, 1)] == [worker_pids[0]] * 2 + [worker_pids[1]] * 2
    procs = list(mesh._group.peers)
    mesh.stop().get()
    assert not [p for p in procs if peers._peers.get(p._key()) is p]  # none kept (a leak per mesh)
    hosts.stop().get(timeout=60)  # let go of the workers before the fixture ends them
    assert faults.named("rec") == [] and faults.named("host_agent") == []


@pytest.mark.parametrize("end", ["stop", "shutdown"])
def test_letting_go_of_the_workers_stops_their_procs_without_a_supervision_event(workers, faults, end):
    """The README's worker pattern ends with the host mesh's stop() (or shutdown()) while actors
    still run on its procs: those procs stop as asked, and no unhandled supervision event ends
    the controller (it did: the agents took the procs down under the live actors)."""
    hosts = attach_to_workers(name=f"lets-go-{end}", ca="trust_all_connections",
                              workers=[a for a, _ in workers], token=TOKEN)
    mesh = hosts.spawn_procs(per_host={"gpus": 1})
    actors = mesh.spawn("live", Recorder)
    actors.where.call().get(timeout=60)
    getattr(hosts, end)().get(timeout=60)
    time.sleep(1)  # a supervision event would arrive within this
    assert faults.named("live") == []
    with pytest.raises(RuntimeError, match="closed the connection"):  # gone, as asked
        actors.where.call().get(timeout=30)


def test_the_host_mesh_spawns_again_after_stop_and_refuses_all_after_shutdown(workers):
    """As Monarch 0.7's owned host mesh: after stop() (a second one is quiet) it spawns again, on
    the same workers; after shutdown(), a second shutdown(), a stop() and spawn_procs raise its
    RuntimeError (they answered as if it served, and spawn_procs after stop() or shutdown()
    failed with a SupervisionError from the agent that stop() had stopped)."""
    hosts = attach_to_workers(name="again", ca="trust_all_connections", workers=[a for a, _ in workers], token=TOKEN)
    hosts.spawn_procs().stop().get(timeout=60)
    hosts.stop().get(timeout=60)
    hosts.stop().get(timeout=60)
    again = hosts.spawn_procs(per_host={"gpus": 1})
    assert list(again.spawn("rec", Recorder).echo.call("x").get(timeout=60).values()) == ["x", "x"]
    hosts.shutdown().get(timeout=60)
    shut = r"^HostMesh has already been shut down: .*start workers again and attach_to_workers"
    for call in (hosts.shutdown, hosts.stop):
        with pytest.raises(RuntimeError, match=shut):
            call().get(timeout=10)
    with pytest.raises(RuntimeError, match=shut):
        hosts.spawn_procs()


def _started_then_held(marker_dir: str):
    """A bootstrap that says it started (a file per proc) and waits for ``release`` there, so a
    spawn stays in flight until the test lets it end (bounded: it gives up after 120 s)."""
    def bootstrap() -> None:
        import os
        import time

        open(os.path.join(marker_dir, f"started-{os.getpid()}"), "w").close()
        for _ in range(2400):
            if os.path.exists(os.path.join(marker_dir, "release")):
                return
            time.sleep(0.05)
    return bootstrap


@pytest.mark.parametrize("end", ["stop", "shutdown"])
def test_a_spawn_in_flight_when_the_host_mesh_stops_is_drained(workers, tmp_path, end):
    """As Monarch drains the spawns in flight, and as KubernetesHostMesh does: the stop waits
    for the spawn, which then stops its procs and raises a RuntimeError saying why (its procs
    were killed under its bootstrap by the agents' end, a SupervisionError saying the bootstrap
    failed); after stop() the host mesh spawns again."""
    hosts = attach_to_workers(name=f"drain-{end}", ca="trust_all_connections", workers=[a for a, _ in workers],
                              token=TOKEN)
    outcome: list[BaseException | ProcMesh] = []

    def spawn() -> None:
        try:
            outcome.append(hosts.spawn_procs(per_host={"gpus": 1}, bootstrap=_started_then_held(str(tmp_path))))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    spawning = threading.Thread(target=spawn)
    spawning.start()
    testing.wait_for(lambda: len(list(tmp_path.glob("started-*"))) == 2, "both procs in their bootstrap")
    stopped = getattr(hosts, end)()
    assert not stopped.done()  # it waits for the spawn in flight
    (tmp_path / "release").touch()
    spawning.join(timeout=120)
    assert not spawning.is_alive()
    words = (r"^HostMesh has already been shut down: " if end == "shutdown"
             else r"\.stop\(\) came while this spawn started its procs, so they were stopped")
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
    assert re.search(words, str(outcome[0])), outcome[0]
    assert stopped.get(timeout=60) is None
    if end == "stop":
        again = hosts.spawn_procs(per_host={"gpus": 1})
        assert list(again.spawn("rec", Recorder).echo.call("x").get(timeout=60).values()) == ["x", "x"]
        hosts.shutdown().get(timeout=60)


def test_a_stop_from_a_done_callback_while_new_agents_are_shipped_does_not_deadlock(workers, monkeypatch):
    """A hosts.stop() in a done callback, which procmesh's I/O thread runs, while another thread
    ships the host mesh's new agents (the first spawn_procs after a stop; with spawn_waits that
    spawn waits for the worker's replies, which the I/O thread delivers) returns, and the spawn
    goes on (drained by that stop): the spawn held the lock stop() takes, so the I/O thread
    waited for the spawn and the spawn for the I/O thread, for ever. The worker is held with
    SIGSTOP while the spawn is in flight, and the callback comes from a held proc's reply."""
    monkeypatch.setattr(options, "spawn_waits", True)
    (address, worker_pid), _ = workers
    hosts = attach_to_workers(name="callback-stop", ca="trust_all_connections", workers=[address], token=TOKEN)
    hosts.stop().get(timeout=60)  # the next spawn_procs ships new agents
    shipping = threading.Event()
    ship = hosts._workers.spawn

    def ship_agents(*args, **kwargs):
        shipping.set()
        return ship(*args, **kwargs)

    monkeypatch.setattr(hosts._workers, "spawn", ship_agents)
    outcome: list[BaseException | ProcMesh] = []

    def spawn() -> None:
        try:
            outcome.append(hosts.spawn_procs(per_host={"gpus": 1}))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    with this_host().spawn_procs(per_host={"gpus": 1}, name="beside") as beside:
        rec = beside.spawn("rec", Recorder)
        proc_pid = rec.where.call_one().get(timeout=60)["pid"]
        spawning = threading.Thread(target=spawn, daemon=True)
        stops: list = []
        called = threading.Event()

        def stop_hosts(_) -> None:
            called.set()
            stops.append(hosts.stop())

        os.kill(worker_pid, signal.SIGSTOP)
        try:
            spawning.start()
            assert shipping.wait(timeout=60)  # the agents' spawn waits for the held worker
            os.kill(proc_pid, signal.SIGSTOP)
            try:
                answered = rec.echo.call_one("x")  # answered once the proc goes on: on the I/O thread
                answered.add_done_callback(stop_hosts)
            finally:
                os.kill(proc_pid, signal.SIGCONT)
            assert called.wait(timeout=60)
        finally:
            os.kill(worker_pid, signal.SIGCONT)
        spawning.join(timeout=60)
        assert not spawning.is_alive(), "the spawn and the callback's stop wait for each other"
        assert answered.get(timeout=10) == "x"
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
    assert re.search(r"\.stop\(\) came while this spawn started its procs", str(outcome[0])), outcome[0]
    assert len(stops) == 1 and stops[0].get(timeout=60) is None
    again = hosts.spawn_procs(per_host={"gpus": 1})  # new agents again: the stop ended those it came during
    assert again.spawn("rec", Recorder).echo.call_one("y").get(timeout=60) == "y"
    hosts.shutdown().get(timeout=60)


def _lingering(hosts, tmp_path):
    """A mesh on ``hosts`` whose procs hold their end open (an atexit handler) until the test
    writes ``release``; each writes ``started`` once it is ending. Its pids."""
    mesh = hosts.spawn_procs(per_host={"gpus": 1})
    started, release = tmp_path / "started", tmp_path / "release"
    return list(mesh.spawn("linger", Lingering).linger_at_exit.call(str(started), str(release)).get(timeout=60).values())


@pytest.mark.parametrize("end", ["stop", "shutdown"])
def test_an_awaited_stop_or_shutdown_lets_the_loop_serve_other_tasks(patient_workers, tmp_path, end):
    """``await hosts.stop()`` (``shutdown()``): the loop serves its other tasks while the procs
    the host mesh spawned end (here the task that lets them end). The stop held the loop until
    the procs gave up waiting; a stop refused after shutdown raises in the awaiting caller."""
    hosts = attach_to_workers(name=f"awaited-{end}", ca="trust_all_connections",
                              workers=[a for a, _ in patient_workers], token=TOKEN)
    pids = _lingering(hosts, tmp_path)
    seen: dict[str, bool] = {}

    async def opener() -> None:
        while not (tmp_path / "started").exists():
            await asyncio.sleep(0.005)
        seen["opened_while_stopping"] = all(_alive(p) for p in pids)  # they end only once released
        (tmp_path / "release").touch()

    async def main() -> None:
        task = asyncio.create_task(opener())
        assert await getattr(hosts, end)() is None
        seen["ended"] = True
        await asyncio.wait_for(task, 60)
        if end == "shutdown":
            with pytest.raises(RuntimeError, match=r"^HostMesh has already been shut down: "):
                await hosts.stop()

    asyncio.run(main())
    assert seen == {"opened_while_stopping": True, "ended": True}
    assert not [p for p in pids if _alive(p)]
    if end == "stop":
        hosts.shutdown().get(timeout=60)


@pytest.mark.parametrize("second", ["stop", "shutdown"])
def test_a_stop_racing_another_in_two_threads_completes_once_the_procs_are_gone(patient_workers, tmp_path, second):
    """A ``stop()`` and a second ``stop()`` (or a ``shutdown()``) called at once from two threads
    (each running an event loop, where stop() returns at once): neither future completes before
    the procs are gone. The one that came second took nothing to stop, so its future was done at
    once, and its last step could end the workers or agents that the first still stopped procs
    through. A stop refused after the shutdown won raises once the shutdown has finished."""
    hosts = attach_to_workers(name=f"race-{second}", ca="trust_all_connections",
                              workers=[a for a, _ in patient_workers], token=TOKEN)
    pids = _lingering(hosts, tmp_path)
    barrier = threading.Barrier(2)
    ends: dict[str, object] = {}
    gone_when_done: list[bool] = []

    def call(key: str, which: str) -> None:
        async def at_once():
            barrier.wait(timeout=60)
            return getattr(hosts, which)()
        fut = asyncio.run(at_once())
        fut.add_done_callback(lambda _: gone_when_done.append(not [p for p in pids if _alive(p)]))
        ends[key] = fut

    threads = [threading.Thread(target=call, args=("first", "stop"), daemon=True),
               threading.Thread(target=call, args=("second", second), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        testing.wait_for(lambda: len(ends) == 2 and (tmp_path / "started").exists(),
                         "both calls made, the procs holding their end")
        assert [fut.done() for fut in ends.values()] == [False, False]
    finally:
        (tmp_path / "release").touch()
    outcomes = []
    for key in ("first", "second"):
        try:
            outcomes.append(ends[key].get(timeout=60))
        except RuntimeError as exc:  # a stop that came after the shutdown, as Monarch refuses it
            assert second == "shutdown" and key == "first" and "already been shut down" in str(exc), exc
            outcomes.append("refused")
    # A future wakes its waiters before it runs its done callbacks: wait for both to have run.
    testing.wait_for(lambda: len(gone_when_done) == 2, "both futures' done callbacks run")
    assert gone_when_done == [True, True]
    if second == "stop":
        assert outcomes == [None, None]
        hosts.shutdown().get(timeout=60)
    else:
        assert outcomes[1] is None


def test_leaving_async_with_while_another_block_shuts_down_waits_for_that_shutdown(patient_workers, tmp_path):
    """Two blocks on one host mesh: the one left second finds it shutting down, and waits for that
    shutdown, in one step with the check (it found it shut down and went on while the procs were
    still ending; two blocks left at once could both shut down, the second raising)."""
    hosts = attach_to_workers(name="two-blocks", ca="trust_all_connections",
                              workers=[a for a, _ in patient_workers], token=TOKEN)
    pids = _lingering(hosts, tmp_path)
    seen: dict[str, bool] = {}

    async def shutting() -> None:
        async with hosts:
            pass  # leaving it shuts down: the procs hold their end until released

    async def waiting() -> None:
        async with hosts:
            while not (tmp_path / "started").exists():  # the other block's shutdown is under way
                await asyncio.sleep(0.005)
            seen["leaving"] = True
        seen["released_when_left"] = (tmp_path / "release").exists()

    async def releaser() -> None:
        while "leaving" not in seen:
            await asyncio.sleep(0.005)
        (tmp_path / "release").touch()

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(waiting(), shutting(), releaser()), 120)

    asyncio.run(main())
    assert seen == {"leaving": True, "released_when_left": True}
    assert not [p for p in pids if _alive(p)]


_alive = processes.alive  # a zombie, or a process gone meanwhile, is not


def _write_at_exit(path: str):
    def register() -> None:
        import atexit

        atexit.register(lambda: open(path, "w").close())
    return register


def test_procs_on_workers_stop_as_asked_and_run_their_exit_handlers(workers, tmp_path):
    """A worker's launcher has no link to its procs (the controller has): a forked proc was not
    told to stop and was killed 5 s later, its atexit handlers not run."""
    hosts = attach_to_workers(name="ends", ca="trust_all_connections", workers=[a for a, _ in workers], token=TOKEN)
    mesh = hosts.spawn_procs(per_host={"gpus": 1})
    marker = tmp_path / "exited"
    mesh.run(_write_at_exit(str(marker))).get(timeout=60)
    mesh.stop().get(timeout=60)
    assert marker.exists()
    hosts.stop().get(timeout=60)


def _worker_above(pid: int, worker_pids: list[int]) -> int | None:
    """The worker among ``pid``'s ancestors (procs are forked by a zygote the worker started)."""
    for _ in range(4):
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().split(")")[1].split()[1])
        if pid in worker_pids:
            return pid
    return None


def test_a_wrong_token_is_refused(workers):
    with pytest.raises(Exception, match="(?i)auth|token") as info:
        attach_to_workers(ca="trust_all_connections", workers=[workers[0][0]], token="not-the-token").initialized.get(timeout=60)
    assert "wrong mesh token" in str(info.value)
    # It names the worker that refused (one of many, where a mesh has many).
    assert workers[0][0].removeprefix("tcp://") in str(info.value), str(info.value)


def test_tls_arguments_say_what_to_use_instead():
    with pytest.raises(NotImplementedError, match="trust_all_connections.*PROCMESH_TOKEN"):
        attach_to_workers(ca="/etc/ca.pem", workers=["tcp://127.0.0.1:1"], token=TOKEN)
    with pytest.raises(NotImplementedError, match="trust_all_connections"):
        run_worker_loop_forever(ca="trust_all_connections", private_key=b"key", address="tcp://127.0.0.1:0", token=TOKEN)


LOOPS = {
    "forever": "run_worker_loop_forever(**ARGS)\nprint('after the loop', NAME, flush=True)",
    "until_shutdown": "run_worker_loop_until_shutdown(**ARGS)\nprint('after the loop', NAME, flush=True)",
    "start": "done = start_worker_loop_forever(**ARGS)\nprint('started', flush=True)\ndone.get()\n"
             "print('after the loop', NAME, flush=True)",
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_what_each_worker_loop_does_after_shutdown(loop):
    program = textwrap.dedent("""
        from mesh_client import run_worker_loop_forever, run_worker_loop_until_shutdown, start_worker_loop_forever
        ARGS = dict(address="tcp://127.0.0.1:0", ca="trust_all_connections")
        NAME = "intact"
    """) + LOOPS[loop]
    worker = subprocess.Popen([sys.executable, "-c", program], env=dict(os.environ, PROCMESH_TOKEN=TOKEN),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        match = re.search(r"listening on (\S+)", worker.stderr.readline())
        assert match
        if loop == "start":
            assert worker.stdout.readline() == "started\n"  # start_worker_loop_forever returned at once
        hosts = attach_to_workers(ca="trust_all_connections", workers=[f"tcp://{match.group(1)}"], token=TOKEN)
        mesh = hosts.spawn_procs(per_host={"gpus": 1})
        assert mesh.spawn("rec", Recorder).echo.call_one("x").get() == "x"
        asyncio.run(mesh.logging_option(level=logging.ERROR))
        assert mesh.run(lambda: __import__("logging").getLogger().level).get() == [logging.ERROR]
        with pytest.raises(NotImplementedError, match="print to their worker's terminal"):
            asyncio.run(mesh.logging_option(stream_to_client=True))
        mesh.stop().get()
        hosts.shutdown().get(timeout=60)
        out, _ = worker.communicate(timeout=60)
    finally:
        worker.kill()
        worker.wait()
    assert worker.returncode == 0
    assert ("after the loop intact" in out) == (loop != "forever")


UNTIL_SHUTDOWN_THEN_WAIT = textwrap.dedent("""
    import sys
    from mesh_client import run_worker_loop_until_shutdown
    run_worker_loop_until_shutdown(address="tcp://127.0.0.1:0", ca="trust_all_connections")
    print("after the loop", flush=True)
    sys.stdin.read()  # the program goes on until the test lets it end
""")


def test_a_worker_loop_that_returned_serves_nothing_more():
    """It returned with its procs running and the connections open before still served (an
    actor could be called on them), its listener closed only some time later."""
    worker = subprocess.Popen([sys.executable, "-c", UNTIL_SHUTDOWN_THEN_WAIT], env=dict(os.environ, PROCMESH_TOKEN=TOKEN),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        match = re.search(r"listening on (\S+):(\d+)", worker.stderr.readline())
        assert match
        address = (match.group(1), int(match.group(2)))
        hosts = attach_to_workers(ca="trust_all_connections", workers=[f"tcp://{address[0]}:{address[1]}"], token=TOKEN)
        mesh = hosts.spawn_procs(per_host={"gpus": 1})
        [proc_pid] = mesh.run(os.getpid).get(timeout=60)
        opened_before = _authenticated(address)
        hosts.shutdown().get(timeout=60)  # the procs' mesh was not stopped: the worker's own procs
        assert worker.stdout.readline() == "after the loop\n"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, timeout=30)
        assert opened_before.recv(1) == b""  # closed by the worker (a socket timeout: still open)
        with pytest.raises(ProcessLookupError):
            os.kill(proc_pid, 0)
    finally:
        worker.kill()
        worker.wait()


def _authenticated(address: tuple[str, int]) -> socket.socket:
    """A connection that passed the worker's handshake (it is never closed for idling)."""
    sock = socket.create_connection(address, timeout=30)
    conn = protocol.Connection(protocol.Role.CLIENT, TOKEN.encode())
    conn.start()
    handshaking.authenticate(streams.SocketStream(sock), conn, "test")
    return sock
