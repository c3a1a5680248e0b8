"""Procs start with their command and bootstrap, and stop without leaving anything behind.

Aspects: bootstrap_command env per point; bootstrap runs before any actor; a failing bootstrap
fails spawn_procs; stop and the context manager end every process, and a stopped mesh cannot be
entered again; an awaited stop (and leaving ``async with``) lets the loop serve its other tasks;
stops of one mesh from two threads both complete only once its procs are gone; a Ctrl-C during
stop() is raised there, and a later stop says the stop was cut short; a stop() from a signal
handler that interrupted the mesh's stop does not wait for it, wherever in stop() it came; a controller killed with -9
takes its procs with it; the proc server does not import torch by itself; module-level finalizers
(``__del__``) run when stop ends a proc, as in Monarch; a terminal's Ctrl-C (SIGINT to the whole
process group) leaves the zygote running, so each proc's real end is reported; calls on a stopped
mesh say it was stopped, not that its procs failed, and stopping its actors after is quiet; a
proc that outlives its stop is killed with a word; a proc that dies in its bootstrap fails
spawn_procs with how it ended and the way on (there is no mesh to respawn yet); procs that end
with their zygote say so, and the zygote is reaped at once; a call during a proc's shutdown is a
supervision failure that says why.
"""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mesh_client import (
    ActorError,
    ProcMesh,
    ProcStartError,
    SupervisionError,
    default_bootstrap_cmd,
    options,
    this_host,
)
from mesh_client._src.runtime import ops, peers
from tests.cluster import processes, testing
from tests.integration.local.actors import AsyncOrderly, Lingering, Orderly, Recorder, wait_for_file

_alive = processes.alive  # a zombie, or a process gone meanwhile, is not


def _wait_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def set_marker():
    os.environ["TEST_BOOTSTRAPPED"] = "yes"


def test_bootstrap_command_and_bootstrap_shape_each_proc():
    base = default_bootstrap_cmd()

    def command(point):
        return base.with_env({"TEST_DEVICE": str(10 + point["gpus"])})

    with this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=command, bootstrap=set_marker) as mesh:
        info = mesh.spawn("r", Recorder).where.call().get()
        assert info.item(gpus=0)["env"] == {"TEST_DEVICE": "10", "TEST_BOOTSTRAPPED": "yes"}
        assert info.item(gpus=1)["env"] == {"TEST_DEVICE": "11", "TEST_BOOTSTRAPPED": "yes"}
        assert not any(v["torch_loaded"] for v in info.values())


def broken_bootstrap():
    raise OSError("no such device")


def test_failing_bootstrap_fails_spawn_procs_and_cleans_up():
    with pytest.raises(ActorError, match="no such device"):
        this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=broken_bootstrap)


def bootstrap_that_ends_rank_one():
    if os.environ.get("PROCMESH_RANK") == "1":
        os._exit(5)


def test_a_proc_that_dies_in_its_bootstrap_fails_spawn_procs_with_the_way_on():
    # There is no mesh yet to respawn: the error says how the proc ended and to spawn again.
    with pytest.raises(SupervisionError) as raised:
        this_host().spawn_procs(per_host={"gpus": 2}, name="dies", bootstrap=bootstrap_that_ends_rank_one)
    message = str(raised.value)
    assert "bootstrap 'bootstrap_that_ends_rank_one' failed, the process it ran in failed: proc dies[gpus=1]" in message
    assert "exited with code 5" in message and "call spawn_procs again" in message
    assert "respawn" not in message and "this actor" not in message


def test_a_proc_that_cannot_start_is_reported():
    bad = default_bootstrap_cmd().with_env({"PROCMESH_MEMORY_FRACTION": "2"})
    with pytest.raises(ProcStartError, match="exited with code 2 before it was ready"):
        this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=bad)


@pytest.mark.parametrize("command", [None, default_bootstrap_cmd().with_env({"PYTHONHASHSEED": "0"})], ids=["forked", "exec"])
def test_stop_ends_every_process(command):
    mesh = this_host().spawn_procs(per_host={"gpus": 3}, bootstrap_command=command)
    pids = [v["pid"] for v in mesh.spawn("r", Recorder).where.call().get().values()]
    assert all(_alive(p) for p in pids)
    mesh.stop().get()
    assert _wait_gone(pids) == []


def test_a_stopped_proc_mesh_cannot_be_entered_again():
    """``async with`` on a stopped mesh raises Monarch's RuntimeError (it entered, as if the mesh
    served); ``with``, ours alone, the same. Leaving a block stops the mesh, once."""
    mesh = this_host().spawn_procs(per_host={"gpus": 1})

    async def block() -> None:
        async with mesh as entered:
            assert entered is mesh

    asyncio.run(block())
    assert mesh._stopped
    with pytest.raises(RuntimeError, match=r"^`ProcMesh` has already been stopped: .* cannot be entered again"):
        asyncio.run(block())
    with pytest.raises(RuntimeError, match=r"^`ProcMesh` has already been stopped: "):
        with mesh:
            pass


def test_leaving_an_async_with_block_stops_the_mesh_off_the_event_loop(tmp_path, monkeypatch):
    """The loop serves its other tasks while ``async with`` stops the mesh: here the task that
    lets the stopping proc end (its atexit handler waits for a file) runs during the stop. A stop
    that held the loop would end only when the proc was killed, the task after it."""
    from mesh_client._src.local import launcher
    from tests.integration.local.actors import Lingering

    monkeypatch.setattr(launcher, "STOP_TIMEOUT", 60.0)  # not killed at 5 s on a slow machine: the test lets it end

    started, release = tmp_path / "started", tmp_path / "release"
    seen: dict[str, bool] = {}

    async def opener() -> None:
        while not started.exists():
            await asyncio.sleep(0.005)
        seen["opened_while_stopping"] = "block_left" not in seen
        release.touch()

    async def main() -> int:
        async with this_host().spawn_procs(per_host={"gpus": 1}, name="aexit") as mesh:
            pid = await mesh.spawn("linger", Lingering).linger_at_exit.call_one(str(started), str(release))
            task = asyncio.create_task(opener())
        seen["block_left"] = True
        await asyncio.wait_for(task, 60)
        return pid

    pid = asyncio.run(main())
    assert seen == {"opened_while_stopping": True, "block_left": True}
    assert _wait_gone([pid]) == []


def test_an_awaited_stop_lets_the_loop_serve_other_tasks(tmp_path, monkeypatch):
    """``await procs.stop()``, as Monarch's async controllers write it: the loop serves its other
    tasks while the proc ends (here the task that lets it end: its atexit handler waits for a
    file). A stop that held the loop (stop() did the whole stop when called) ended only when the
    proc was killed, the task after it."""
    from mesh_client._src.local import launcher
    from tests.integration.local.actors import Lingering

    monkeypatch.setattr(launcher, "STOP_TIMEOUT", 60.0)  # not killed at 5 s on a slow machine: the test lets it end

    started, release = tmp_path / "started", tmp_path / "release"
    seen: dict[str, bool] = {}

    async def opener() -> None:
        while not started.exists():
            await asyncio.sleep(0.005)
        seen["opened_while_stopping"] = "stopped" not in seen
        release.touch()

    async def main() -> int:
        mesh = await this_host().spawn_procs_async(per_host={"gpus": 1}, name="awaited-stop")
        pid = await mesh.spawn("linger", Lingering).linger_at_exit.call_one(str(started), str(release))
        task = asyncio.create_task(opener())
        assert await mesh.stop() is None
        seen["stopped"] = True
        await asyncio.wait_for(task, 60)
        return pid

    pid = asyncio.run(main())
    assert seen == {"opened_while_stopping": True, "stopped": True}
    assert not _alive(pid)


def test_stops_of_one_mesh_from_two_threads_both_complete_once_its_procs_are_gone(tmp_path, monkeypatch):
    """Two threads (each running an event loop, as async controllers do) stop one mesh at once:
    each future completes only when the proc has ended. The second stop's future was done at
    once, while the first still waited for the proc."""
    from mesh_client._src.local import launcher
    from tests.integration.local.actors import Lingering

    monkeypatch.setattr(launcher, "STOP_TIMEOUT", 60.0)  # the proc ends when the test lets it, not killed at 5 s
    started, release = tmp_path / "started", tmp_path / "release"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="stopped-twice")
    pid = mesh.spawn("linger", Lingering).linger_at_exit.call_one(str(started), str(release)).get(timeout=60)
    barrier = threading.Barrier(2)
    stops: list = []

    def stop() -> None:
        async def call():  # on a loop's thread stop() returns at once; the stop goes on beside it
            barrier.wait(timeout=60)
            return mesh.stop()
        stops.append(asyncio.run(call()))

    threads = [threading.Thread(target=stop, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        testing.wait_for(lambda: len(stops) == 2 and started.exists(), "both stops called, the proc holding its end")
        assert [fut.done() for fut in stops] == [False, False]
    finally:
        release.touch()
    for fut in stops:
        assert fut.get(timeout=60) is None
        assert not _alive(pid)


def test_a_ctrl_c_during_stop_is_raised_there_and_later_stops_say_it_was_cut_short(tmp_path, monkeypatch):
    """Ctrl-C (SIGINT) while ``procs.stop()`` waits for the proc to end: that call raises the
    KeyboardInterrupt, and a later ``stop()`` (a ``finally:``, a host mesh's stop) raises a
    RuntimeError saying the stop was cut short. The future kept the KeyboardInterrupt instead:
    ``stop()`` returned as if done, the Ctrl-C lost unless its future was waited for, and every
    later stop of the mesh, the first's future, raised that stale Ctrl-C."""
    from mesh_client._src.local import launcher

    assert threading.current_thread() is threading.main_thread()  # where Python raises a SIGINT
    monkeypatch.setattr(launcher, "STOP_TIMEOUT", 60.0)  # the proc ends when the test lets it, not killed at 5 s
    started, release = tmp_path / "started", tmp_path / "release"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="interrupted-stop")
    pid = mesh.spawn("linger", Lingering).linger_at_exit.call_one(str(started), str(release)).get(timeout=60)
    main = threading.get_ident()

    def interrupt() -> None:  # once the proc is ending, held: stop() is waiting for it
        testing.wait_for(started.exists, "the proc ending, held")
        signal.pthread_kill(main, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt, daemon=True)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            mesh.stop()
    finally:
        release.touch()
        interrupter.join(60)
    with pytest.raises(RuntimeError, match=r"^the stop of this proc mesh was interrupted \(KeyboardInterrupt\)"):
        mesh.stop().get(timeout=60)
    assert _wait_gone([pid]) == []


def test_a_signal_handler_that_stops_the_mesh_its_thread_is_stopping_does_not_hang(tmp_path, monkeypatch):
    """A program's signal handler (a SIGTERM handler that stops its meshes, then exits) runs
    ``procs.stop().get()`` on the main thread while that thread is inside ``procs.stop()``: it
    cannot wait for that stop, which goes on only once the handler returns, so its future is
    done at once (a second stop is quiet), and the first stop ends as usual. It got the first
    stop's future, still pending: the handler waited for ever."""
    from mesh_client._src.local import launcher

    assert threading.current_thread() is threading.main_thread()  # where Python runs signal handlers
    monkeypatch.setattr(launcher, "STOP_TIMEOUT", 60.0)  # the proc ends when the test lets it, not killed at 5 s
    started, release = tmp_path / "started", tmp_path / "release"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="reentered-stop")
    pid = mesh.spawn("linger", Lingering).linger_at_exit.call_one(str(started), str(release)).get(timeout=60)
    handled: list[object] = []

    def handler(signum, frame) -> None:
        try:
            handled.append(mesh.stop().get(timeout=20))  # bounded: the test fails, not hangs, without the fix
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            handled.append(exc)
        release.touch()

    main = threading.get_ident()

    def signal_once_stopping() -> None:  # once the proc is ending, held: stop() is waiting for it
        testing.wait_for(started.exists, "the proc ending, held")
        signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, handler)
    signaller = threading.Thread(target=signal_once_stopping, daemon=True)
    signaller.start()
    try:
        assert mesh.stop().get(timeout=60) is None
    finally:
        signal.signal(signal.SIGUSR1, previous)
        release.touch()
        signaller.join(60)
    assert handled == [None]
    assert _wait_gone([pid]) == []


def _stop_traced(mesh: ProcMesh, on_line) -> BaseException | None:
    """``mesh.stop().get()`` on a thread of its own, calling ``on_line(line)`` at each line of
    ``ProcMesh.stop`` as it runs there, as a signal handler would between two steps (a trace
    function runs on the traced thread, untraced itself). What it raised; bounded."""
    outcome: list[BaseException | None] = []

    def local(frame, event, arg):
        if event == "line":
            on_line(frame.f_lineno)
        return local

    def run() -> None:
        sys.settrace(lambda frame, event, arg: local if frame.f_code is ProcMesh.stop.__code__ else None)
        try:
            mesh.stop().get(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - read by the test
            outcome.append(exc)
        else:
            outcome.append(None)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=90)
    assert not thread.is_alive(), "the stop never returned: a stop re-entered on its thread waits for ever"
    return outcome[0]


def test_a_stop_re_entered_on_its_thread_between_any_two_steps_of_stop_is_done(monkeypatch):
    """A signal handler may run between any two steps of the stop() it interrupts; a handler that
    stops the same mesh there must not wait for that stop (which goes on only once the handler
    returns) nor for anything the stop holds: stop() took a plain Lock, so a handler that came
    while it was held waited for it for ever, and one that came after the lock but before the
    blocking half began got the pending future. At each line of stop() in turn, a stop() of
    the same mesh on the same thread is done (or done the whole stop, before the first took
    it), and the first stop ends the procs."""
    lines: list[int] = []
    first = this_host().spawn_procs(per_host={"gpus": 1}, name="traced-stop")
    assert _stop_traced(first, lines.append) is None  # the lines a stop runs
    assert lines
    for line in dict.fromkeys(lines):
        mesh = this_host().spawn_procs(per_host={"gpus": 1}, name=f"reentered-at-{line}")
        pid = mesh.spawn("rec", Recorder).where.call_one().get(timeout=60)["pid"]
        handled: list[BaseException | None] = []

        def handler(at: int, mesh=mesh, line=line, handled=handled) -> None:
            if at == line and not handled:
                try:
                    handled.append(mesh.stop().get(timeout=20))  # bounded: it got a stop it cannot wait for
                except BaseException as exc:  # noqa: BLE001 - read by the test
                    handled.append(exc)

        assert _stop_traced(mesh, handler) is None, f"line {line}"
        assert handled == [None], f"line {line}"
        assert _wait_gone([pid]) == [], f"line {line}"


def test_killed_controller_takes_its_procs_along(tmp_path):
    script = tmp_path / "controller.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys, time
            from mesh_client import this_host
            from tests.integration.local.actors import Recorder
            mesh = this_host().spawn_procs(per_host={"gpus": 2})
            pids = [v["pid"] for v in mesh.spawn("r", Recorder).where.call().get().values()]
            print(" ".join(map(str, pids)), flush=True)
            time.sleep(600)
            """
        )
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ctl = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=root, env=dict(os.environ, PYTHONPATH=root))
    try:
        pids = [int(p) for p in ctl.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
        assert _wait_gone(pids) == []
    finally:
        ctl.kill()


def test_controller_exit_stops_procs(tmp_path):
    script = tmp_path / "controller.py"
    script.write_text(
        textwrap.dedent(
            """
            from mesh_client import this_host
            from tests.integration.local.actors import Recorder
            mesh = this_host().spawn_procs(per_host={"gpus": 2})
            print(" ".join(str(v["pid"]) for v in mesh.spawn("r", Recorder).where.call().get().values()))
            """
        )
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root, env=dict(os.environ, PYTHONPATH=root), timeout=120)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    assert _wait_gone(pids) == []


def test_a_ctrl_c_at_the_terminal_reports_how_each_proc_really_ended(tmp_path):
    """A terminal's Ctrl-C signals the controller's whole process group, the zygote (the fork
    server of the procs) included: it must not die of it, or every forked proc is reported
    killed by SIGKILL with it, whatever ended each one (and the zygote prints a traceback)."""
    script = tmp_path / "controller.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import mesh_client.actor
            from mesh_client import SupervisionError, this_host
            from tests.integration.local.actors import Recorder
            mesh_client.actor.unhandled_fault_hook = lambda failure: None  # the end is read below
            mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="ctrlc")
            rec = mesh.spawn("rec", Recorder)
            rec.where.call_one().get(timeout=60)
            try:
                pending = rec.wait_for.call_one(sys.argv[1], 600)
                print("ready", flush=True)
                pending.get()
            except KeyboardInterrupt:
                print("interrupted", flush=True)
            except SupervisionError as exc:  # the proc's end may come first
                print(f"failed: {exc}", flush=True)
            print(f"exit: {mesh._group.owner.processes[0].wait(timeout=60)}", flush=True)
            """
        )
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ctl = subprocess.Popen([sys.executable, str(script), str(tmp_path / "never")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=root, env=dict(os.environ, PYTHONPATH=root),
                           start_new_session=True,  # a process group of its own, as a terminal's job
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert ctl.stdout.readline() == "ready\n"
        os.killpg(ctl.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
        out, err = ctl.communicate(timeout=120)
    finally:
        ctl.kill()
        ctl.wait()
    assert "exit: 0" in out, (out, err)  # the proc server ended on its Ctrl-C, as an exec'd one does
    assert "Traceback" not in err, err


def test_calls_on_a_stopped_proc_mesh_say_it_was_stopped(faults, tmp_path):
    """Not that its procs failed, nor to respawn them (a stopped mesh refuses to), as Monarch's
    "actor mesh is stopped due to proc mesh shutdown"."""
    mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="ended")
    rec = mesh.spawn("rec", Recorder)
    in_flight = rec.wait_for.call(str(tmp_path / "never"))
    mesh.stop("done training").get()
    # Queued when the stop came: not run after the actor's cleanup, the proc says why; begun
    # already: the proc ends under it. Either way with the stop's reason.
    with pytest.raises(SupervisionError, match=r"(is shutting down: it was asked to stop|was stopped) \(done training\)"):
        in_flight.get(timeout=60)
    for fut in (rec.echo.call(1), rec.slice(gpus=1).echo.call_one(1)):
        with pytest.raises(SupervisionError, match=r"proc ended\[gpus=\d\] \(pid \d+\) was stopped \(done training\): "
                                                   r"the actor mesh is stopped due to proc mesh shutdown") as info:
            fut.get(timeout=60)
        assert "respawn" not in str(info.value)
    assert faults.named("rec") == []


def test_stopping_actors_of_a_stopped_proc_mesh_is_done_already(faults):
    """Their actors went with the procs: stopping them after is quiet, as stopping twice is,
    and stops only the actors of the procs still running."""
    mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="stopfirst")
    rec = mesh.spawn("rec", Recorder)
    other = mesh.spawn("other", Recorder)
    mesh.slice(gpus=0).stop().get(timeout=60)
    other.stop().get(timeout=60)  # gpus=1's actor stopped; gpus=0's went with its proc
    with pytest.raises(SupervisionError, match="stopped"):
        other.slice(gpus=1).echo.call_one(1).get(timeout=60)
    assert rec.slice(gpus=1).echo.call_one(2).get(timeout=60) == 2
    mesh.stop().get(timeout=60)
    rec.stop().get(timeout=60)
    rec.stop().get(timeout=60)
    assert faults.named("rec") == [] and faults.named("other") == []


def test_a_proc_that_outlives_its_stop_is_killed_with_a_word(tmp_path, capfd):
    """An atexit handler that never returns: the proc is killed after STOP_TIMEOUT, and the
    controller's stderr says which proc, why, and what may hold it."""
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="outlives")
    actor = mesh.spawn("linger", Lingering)
    pid = actor.linger_at_exit.call_one(str(tmp_path / "started"), str(tmp_path / "never")).get(timeout=60)
    mesh.stop("finished").get(timeout=60)
    assert _wait_gone([pid]) == []
    err = capfd.readouterr().err
    assert (f"procmesh: proc outlives[gpus=0] (pid {pid}) had not ended 5 s after it was asked to stop (finished), "
            "so it was killed (SIGKILL): something in it outlived its actors (an atexit handler") in err, err


def test_module_finalizers_run_when_stop_ends_a_proc(tmp_path):
    from tests.integration.local.actors import FinalizerActor

    marker = tmp_path / "marker.txt"
    marker.write_text("not finalized")
    mesh = this_host().spawn_procs(per_host={"gpus": 1})
    pid = mesh.spawn("fin", FinalizerActor, str(marker)).pid.call_one().get()
    mesh.stop().get()
    assert _wait_gone([pid]) == []
    assert marker.read_text() == "finalized"


def test_finalizers_of_an_actor_shipped_by_value_run_too(tmp_path):
    """An actor class of the controller's own script reaches the proc by value, its globals in
    a dict no module holds: a ``__del__`` on one of them ran only when the class came from an
    importable file."""
    marker = tmp_path / "marker.txt"
    script = tmp_path / "controller.py"
    script.write_text(textwrap.dedent(
        """
        import sys
        from mesh_client import Actor, endpoint, this_host

        class Held:
            def __init__(self, path):
                self.file = open(path, "w")

            def __del__(self):
                self.file.write("finalized")
                self.file.close()

        class Holder(Actor):
            def __init__(self, path):
                global held
                held = Held(path)

            @endpoint
            def ping(self):
                return "pong"

        mesh = this_host().spawn_procs(per_host={"gpus": 1})
        assert mesh.spawn("holder", Holder, sys.argv[1]).ping.call_one().get(timeout=60) == "pong"
        mesh.stop().get(timeout=60)
        """))
    done = subprocess.run([sys.executable, str(script), str(marker)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "finalized"


def test_procs_that_end_with_their_zygote_say_so_and_the_zygote_is_reaped(tmp_path):
    """The zygote (the fork server of the procs) killed: each forked proc's failure names it
    and how it ended, not "killed by SIGKILL" as if the proc had been, and the zygote is reaped
    at once (no zombie until the controller exits). A controller of its own: the zygote is one
    per process."""
    script = tmp_path / "controller.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, time
            import mesh_client.actor
            from mesh_client import SupervisionError, this_host
            from mesh_client._src.local import zygote_client

            def alive(pid):
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        return f.read().rsplit(")", 1)[1].split()[0] != "Z"
                except FileNotFoundError:
                    return False

            from tests.integration.local.actors import Recorder
            mesh_client.actor.unhandled_fault_hook = lambda failure: None  # read below
            mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="orphans")
            rec = mesh.spawn("rec", Recorder)
            rec.where.call().get(timeout=60)
            procs = [p.pid for p in mesh._group.owner.processes]
            zygote = zygote_client.get_zygote()._process
            os.kill(zygote.pid, signal.SIGKILL)
            deadline = time.monotonic() + 60  # the procs end (SIGTERM) and leave; then call
            while any(alive(pid) for pid in procs) and time.monotonic() < deadline:
                time.sleep(0.01)
            try:
                rec.where.call().get(timeout=60)
                print("no failure")
            except SupervisionError as exc:
                print("failed:", exc)
            print("reaped:", zygote.returncode)
            """
        )
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root,
                         env=dict(os.environ, PYTHONPATH=root), timeout=180)
    assert out.returncode == 0, out.stderr
    assert "failed:" in out.stdout and "ended with the zygote that forked it" in out.stdout, out
    assert "killed by SIGKILL)" in out.stdout, out  # the zygote's end, in parentheses
    assert "reaped: -9" in out.stdout, out  # Popen.returncode is set by the reaping wait


def test_a_call_during_a_procs_shutdown_fails_with_why_not_as_a_wrong_actor(tmp_path, monkeypatch):
    """A proc that received SIGTERM (a pod deleted, a node drained) stops its actors, then runs
    its finalizers: a call that comes meanwhile, direct or routed through a tree of procs, is a
    supervision failure that says the proc is shutting down and why, not "no actor in this proc"
    (a LookupError, as if the caller had named a wrong actor); the watch of an actor stopped
    before still says it was stopped, not failed."""
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="closing")
    release = tmp_path / "release"
    try:
        actor = mesh.spawn("linger", Lingering)
        monkeypatch.setattr(options, "tree_fanout_min", 1)  # a route is fixed at spawn
        routed = mesh.spawn("routed", Recorder)
        monkeypatch.setattr(options, "tree_fanout_min", 0)
        stopped = mesh.spawn("stopped", Recorder)
        routed.where.call().get(timeout=60)
        stopped.where.call_one().get(timeout=60)
        stopped_id = stopped._actor_id
        stopped.stop().get(timeout=60)
        started = tmp_path / "finalizing"
        pid = actor.linger_at_exit.call_one(str(started), str(release)).get(timeout=60)
        os.kill(pid, signal.SIGTERM)
        assert wait_for_file(str(started))  # the actors are stopped; the finalizers run
        with pytest.raises(SupervisionError) as direct:
            actor.linger_at_exit.call_one(str(started), str(release)).get(timeout=60)
        with pytest.raises(SupervisionError) as through_tree:
            routed.where.call().get(timeout=60)
        for caught in (direct, through_tree):
            assert "is shutting down: it received SIGTERM" in str(caught.value)
        status, _, _ = mesh._group.peers[0].request((ops.WATCH, stopped_id), (), lambda raw: raw).get(timeout=60)
        assert status == peers.OK
    finally:
        release.touch()
        mesh.stop()


def test_a_stopping_proc_cleans_up_after_the_call_in_progress_and_runs_none_after(tmp_path):
    """As in Monarch: ``__cleanup__`` runs once the call in progress has ended (not beside it:
    an actor handles one message at a time), and the calls queued behind are not run after it:
    each is a supervision failure saying the proc is shutting down."""
    log, gate, idle_log = tmp_path / "log", tmp_path / "gate", tmp_path / "idle"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="orderly")
    actor = mesh.spawn("o", Orderly, str(log))
    idle = mesh.spawn("idle", Orderly, str(idle_log))
    idle.work.call_one(0, str(tmp_path)).get(timeout=60)
    running = actor.work.call_one(0, str(gate))
    assert wait_for_file(str(log))  # call 0 runs
    queued = [actor.work.call_one(i, str(gate)) for i in (1, 2, 3)]
    stopping = threading.Thread(target=mesh.stop, args=("finished",))  # stop() returns once they end
    stopping.start()
    # The idle actor's cleanup runs at once: the proc is shutting down, call 0 still running.
    deadline = time.monotonic() + 60
    while "cleanup" not in idle_log.read_text():
        assert time.monotonic() < deadline, "the proc never began to shut down"
        time.sleep(0.01)
    gate.touch()
    stopping.join(60)
    assert running.get(timeout=60) == 0
    for fut in queued:
        with pytest.raises(SupervisionError, match=r"is shutting down: it was asked to stop \(finished\)"):
            fut.get(timeout=60)
    assert log.read_text().splitlines() == ["start 0 cleaned=False", "end 0 cleaned=False", "cleanup cleaned=False"]


def test_a_call_still_running_when_its_proc_must_end_gets_the_cleanup_beside_it(tmp_path, capfd):
    """A call that outlasts dispatch.CLOSE_SECONDS: ``__cleanup__`` runs anyway (the proc says
    so on its stderr), so the proc ends before it is killed; the call in progress fails as the
    proc's end (with the stop's reason), those queued behind as its shutdown; none run after."""
    log, gate = tmp_path / "log", tmp_path / "never"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="stuck")
    actor = mesh.spawn("o", Orderly, str(log))
    running = actor.work.call_one(0, str(gate))
    assert wait_for_file(str(log))
    queued = actor.work.call_one(1, str(gate))
    mesh.stop("finished").get(timeout=60)
    with pytest.raises(SupervisionError, match=r"is shutting down: it was asked to stop \(finished\)"):
        queued.get(timeout=60)
    with pytest.raises(SupervisionError, match=r"was stopped \(finished\)"):
        running.get(timeout=60)  # its modules were finalized under it: no stray AttributeError
    assert log.read_text().splitlines() == ["start 0 cleaned=False", "cleanup cleaned=False"]
    err = capfd.readouterr().err
    assert "had not ended" not in err, err  # it ended before it was killed


def test_an_awaiting_async_call_is_cancelled_when_its_proc_stops(tmp_path):
    """As Monarch's: an async endpoint awaiting is cancelled at the stop (an await is a clean
    point to stop at), its caller hears the proc is shutting down, then ``__cleanup__`` runs."""
    log = tmp_path / "log"
    mesh = this_host().spawn_procs(per_host={"gpus": 1}, name="awaiting")
    actor = mesh.spawn("a", AsyncOrderly, str(log))
    running = actor.work.call_one(str(tmp_path / "never"))
    assert wait_for_file(str(log))
    mesh.stop("finished").get(timeout=60)
    with pytest.raises(SupervisionError, match=r"is shutting down: it was asked to stop \(finished\)"):
        running.get(timeout=60)
    assert log.read_text().splitlines() == ["start", "cancelled", "cleanup"]


def test_a_stopped_proc_mesh_leaves_no_route_of_its_actor_meshes():
    """What the client keeps per actor mesh (its route, trees.py) goes with its procs, also for
    actor meshes never stopped themselves: none is kept per mesh in a long-running controller."""
    from mesh_client._src.actor import trees

    mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="routes")
    ids = [mesh.spawn(f"r{i}", Recorder)._actor_id for i in range(3)]
    assert all(i in trees._routes for i in ids)
    mesh.slice(gpus=0).stop().get(timeout=60)
    assert all(i in trees._routes for i in ids)  # gpus=1's actors still run
    mesh.stop().get(timeout=60)
    assert not [i for i in ids if i in trees._routes]


def test_a_sigterm_delivered_to_another_thread_of_a_proc_still_ends_it():
    """The kernel may hand a process's SIGTERM (its zygote's death, the pod's deletion) to any
    of its threads; Python runs the handler on the main thread only, which must not sleep on."""
    import ctypes

    with this_host().spawn_procs(per_host={"gpus": 1}, name="threaded") as procs:
        pid = procs.spawn("rec", Recorder).where.call_one().get(timeout=60)["pid"]
        others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
        assert others, "a proc server runs threads beside its main one"
        assert ctypes.CDLL(None, use_errno=True).syscall(234, pid, others[0], signal.SIGTERM) == 0  # tgkill
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z", "the proc sleeps on after SIGTERM"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
