"""Supervision on the local backend: failures reach the owner of the mesh, as in Monarch.

Aspects: a broadcast endpoint that raises kills that actor and reaches the client's
unhandled_fault_hook, and later calls to it raise SupervisionError while its neighbours answer;
a failing __init__ does not fail spawn but the first call and the hook; a proc killed with -9 is
a fault naming the actor and how the proc died; an owner's __supervise__ handles its children's
failures; without it the failure climbs, the owner fails too and the report nests; stopping a
mesh is no fault; the default hook ends the controller, interrupting it once however many actors
fail; a stopped actor mesh says so, to a call that reaches it as it stops too.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from mesh_client import ActorError, SupervisionError, this_host, this_proc
from tests.integration.local.actors import (
    FailingInit,
    Lambda,
    Nest,
    SuperviseNest,
    raise_value_error,
)


def test_broadcast_exception_kills_the_actor_and_reaches_the_hook(procs, faults):
    actors = procs.spawn("lam", Lambda)
    actors.slice(hosts=1, gpus=0).run.broadcast(raise_value_error)
    (failure,) = faults.wait("lam")
    assert failure.mesh_name.startswith("lam-") and failure.crashed_ranks == [2]
    report = failure.report()
    assert report.startswith("The actor <root>.<tests.integration.local.actors.Lambda lam{'hosts': 1/2, 'gpus': 0/2}>")
    assert "and all its descendants have failed:" in report and "ValueError: Error." in report
    assert str(failure).startswith(f"MeshFailure(mesh_name={failure.mesh_name}, crashed_ranks=[2], event=Supervision event")
    with pytest.raises(SupervisionError, match=r"Endpoint call lam\.run\(\) failed, The actor .*lam\{'hosts': 1/2, 'gpus': 0/2\}> and all"):
        actors.run.call(os.getpid).get()
    assert actors.slice(hosts=0, gpus=1).run.call_one(lambda: "alive").get() == "alive"


def test_failing_init_surfaces_at_the_first_call_and_in_the_hook(procs, faults):
    broken = procs.spawn("broken", FailingInit)  # does not raise
    with pytest.raises(ActorError, match="cannot build the model"):
        broken.initialized.get()
    with pytest.raises(SupervisionError, match=r"Endpoint call broken\.ping\(\) failed, The actor .*FailingInit broken"):
        broken.slice(hosts=0, gpus=0).ping.call_one().get()
    assert len(faults.wait("broken", 4)) == 4  # one per actor of the mesh
    assert all("RuntimeError: cannot build the model" in f.report() for f in faults.named("broken"))


def test_proc_death_is_a_fault_naming_the_actor(faults):
    with this_host().spawn_procs(per_host={"gpus": 2}, name="victim") as mesh:
        actors = mesh.spawn("k", Lambda)
        pid = actors.slice(gpus=1).run.call_one(os.getpid).get()
        os.kill(pid, 9)
        (failure,) = faults.wait("k")
        assert failure.crashed_ranks == [1]
        assert "The actor <root>.<tests.integration.local.actors.Lambda k{'gpus': 1/2}> and all its descendants have failed:" in failure.report()
        assert "the process this actor was running on failed: Killed(sig=9): proc victim[gpus=1]" in failure.report()
        assert "killed by SIGKILL" in failure.report()
        assert actors.slice(gpus=0).run.call_one(lambda: 1).get() == 1
    assert len(faults.named("k")) == 1  # stopping the rest is no fault


def test_supervise_handles_the_failures_of_owned_meshes(procs, faults):
    owner = procs.slice(hosts=0, gpus=0).spawn("owner", SuperviseNest)
    owner.nested.call_one(raise_value_error).get()
    seen = []
    for _ in range(200):  # the failure arrives asynchronously; bounded wait
        seen = owner.seen.call_one().get()
        if seen:
            break
        time.sleep(0.05)
    (mesh_name, ranks, report) = seen[0]
    assert mesh_name.startswith("nested-") and ranks == [0]
    assert ".<tests.integration.local.actors.SuperviseNest owner{}>.<tests.integration.local.actors.Lambda nested{'a_dim': 0/1}>" in report
    assert faults.named("owner") == [] and faults.named("nested") == []
    with pytest.raises(ActorError, match="SupervisionError: Endpoint call nested.run"):  # the owner lives on
        owner.nested_call_one.call_one(lambda: 4).get()


def test_unhandled_failure_climbs_to_the_client(procs, faults):
    top = procs.slice(hosts=0, gpus=1).spawn("top", Nest)
    assert top.nested_call_one.call_one(lambda: 4).get() == 4
    top.nested.call_one(raise_value_error).get()
    (failure,) = faults.wait("top")
    report = failure.report()
    assert failure.mesh_name.startswith("top-")  # the owner's mesh failed, with its child's report, as in Monarch
    assert report.startswith(
        "The actor <root>.<tests.integration.local.actors.Nest top{}>.<tests.integration.local.actors.Lambda nested{'a_dim': 0/1}>"
        " and all its descendants have failed:"
    )
    with pytest.raises(SupervisionError, match="top"):
        top.nested_call_one.call_one(lambda: 4).get()


def test_killing_a_nested_proc_climbs_as_a_proc_failure(procs, faults):
    top = procs.slice(hosts=1, gpus=1).spawn("top", Nest)
    top.kill_nest.call_one().get()
    (failure,) = faults.wait("top")
    assert "Lambda nested{'a_dim': 0/1}> and all its descendants have failed" in failure.report()
    assert "the process this actor was running on failed" in failure.report()


def test_stopped_actor_mesh_says_it_was_stopped(procs, faults):
    actors = procs.spawn("stopme", Lambda)
    actors.stop().get()
    with pytest.raises(SupervisionError, match=r"actor .*stopme.* has status: stopped \(stopped by client\)"):
        actors.run.call(lambda: 1).get()
    assert faults.named("stopme") == []


def test_a_call_that_reaches_an_actor_as_it_stops_is_answered(monkeypatch, faults):
    """A call queued to an actor after its thread stopped reading (the stop answered, the
    actor not yet forgotten by its proc) is answered with the stop, not left waiting for ever.
    The window, microseconds wide on a quiet machine, is widened in the controller's own proc
    server (this_proc), where the test can reach it."""
    from mesh_client._src.server import dispatch

    exited = dispatch.ProcServer._actor_exited

    def slowly(self, runner):
        time.sleep(0.5)
        exited(self, runner)

    monkeypatch.setattr(dispatch.ProcServer, "_actor_exited", slowly)
    actor = this_proc().spawn("stopnow", Lambda)
    actor.initialized.get(timeout=60)
    actor.stop().get(timeout=60)
    with pytest.raises(SupervisionError, match=r"has status: stopped \(stopped by client\)"):
        actor.run.call_one(lambda: 1).get(timeout=30)
    assert faults.named("stopnow") == []


def test_default_hook_ends_the_controller():
    program = textwrap.dedent(
        """
        import time
        from mesh_client import this_host
        from tests.integration.local.actors import Lambda, raise_value_error

        actors = this_host().spawn_procs().spawn("lam", Lambda)
        actors.run.broadcast(raise_value_error)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted by the fault")
            raise SystemExit(1)
        print("still running")
        """
    )
    # SIGINT as a terminal's program has it, whatever the runner of these tests inherited
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_default)
    assert done.returncode == 1, done.stderr
    assert "interrupted by the fault" in done.stdout
    assert "unhandled supervision event, ending the controller" in done.stderr
    assert "ValueError: Error." in done.stderr


def test_a_hook_that_raises_shows_its_own_traceback():
    """A bug in the program's unhandled_fault_hook was reported by its type's name alone."""
    program = textwrap.dedent(
        """
        import time
        import mesh_client.actor
        from mesh_client import this_host
        from tests.integration.local.actors import Lambda, raise_value_error

        def hook(failure):
            return failure.mesh_nam  # a typo

        mesh_client.actor.unhandled_fault_hook = hook
        actors = this_host().spawn_procs().spawn("lam", Lambda)
        actors.run.broadcast(raise_value_error)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            raise SystemExit(1)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_default)
    assert done.returncode == 1, done.stderr
    assert "the program's unhandled_fault_hook raised:" in done.stderr
    assert ", in hook" in done.stderr and "AttributeError: 'MeshFailure' object has no attribute 'mesh_nam'" in done.stderr
    assert "ValueError: Error." in done.stderr  # the event itself, after it


def test_the_default_hook_interrupts_the_controller_once_for_many_failures():
    """One incident (here two procs killed, two actor meshes on them) fails many actors: the
    program's KeyboardInterrupt handler (a checkpoint, the stop of its meshes) must not be
    interrupted again by each later failure; those are printed."""
    program = textwrap.dedent(
        """
        import os, signal, threading, time
        from mesh_client import SupervisionError, this_host
        from mesh_client._src.actor import supervision
        from tests.integration.local.actors import Recorder

        mesh = this_host().spawn_procs(per_host={"gpus": 2}, name="many")
        meshes = [mesh.spawn(name, Recorder) for name in ("first", "second")]
        pids = [v["pid"] for v in meshes[0].where.call().get(timeout=60).values()]
        try:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            time.sleep(60)
            print("not interrupted")
        except KeyboardInterrupt:
            print("cleanup started", flush=True)
            try:
                for rec in meshes:  # every death seen here: the end of every actor is queued
                    for gpu in range(2):
                        try:
                            rec.slice(gpus=gpu).echo.call_one(0).get(timeout=60)
                        except SupervisionError:
                            pass
                done = threading.Event()
                supervision.submit(done.set)  # after every end queued before it
                done.wait(60)
                print("cleanup done", flush=True)
            except KeyboardInterrupt:
                print("cleanup interrupted", flush=True)
            raise SystemExit(1)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_default)
    assert done.returncode == 1, done.stderr
    assert "cleanup done" in done.stdout and "cleanup interrupted" not in done.stdout, (done.stdout, done.stderr)
    assert done.stderr.count("unhandled supervision event, ending the controller") == 1
    assert done.stderr.count("and all its descendants have failed") == 4  # none is lost


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_default_hook_ends_a_controller_that_ignores_sigint():
    """Started in the background by a script (``python train.py &``), a program inherits SIGINT
    ignored: the default hook must still end it, not leave it running after the fault."""
    program = textwrap.dedent(
        """
        import time
        from mesh_client import this_host
        from tests.integration.local.actors import Lambda, raise_value_error

        actors = this_host().spawn_procs().spawn("lam", Lambda)
        actors.run.broadcast(raise_value_error)
        try:
            for _ in range(600):  # Python code between short sleeps: interrupted at once
                time.sleep(0.1)
        except KeyboardInterrupt:
            print("interrupted by the fault")
            raise SystemExit(1)
        print("still running")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_ignored)
    assert done.returncode == 1, done.stderr
    assert "interrupted by the fault" in done.stdout, done.stdout
    assert "unhandled supervision event, ending the controller" in done.stderr


def test_default_hook_exits_a_blocked_controller_that_ignores_sigint():
    program = textwrap.dedent(
        """
        import time
        from mesh_client import this_host
        from tests.integration.local.actors import Lambda, raise_value_error

        actors = this_host().spawn_procs().spawn("lam", Lambda)
        actors.run.broadcast(raise_value_error)
        time.sleep(60)  # one blocking call: no bytecode runs until it returns
        print("still running")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_ignored)
    assert done.returncode == 1, done.stderr
    assert "still running" not in done.stdout
    assert "SIGINT is ignored in this process and the main thread is blocked" in done.stderr
