"""Every error path reaches the caller with what failed and where, and never hangs.

Aspects: an endpoint exception returns as ActorError with the remote traceback and the actor
lives on (an async endpoint's traceback starts in user code too); an unpicklable exception still arrives; with options.spawn_waits a failing __init__
fails spawn; kill -9 of a proc fails its pending and later calls with the proc's name and how it
died; other procs go on; sys.exit() in an async endpoint fails the actor, as in a def endpoint.
"""

import os
import signal
import time

import pytest

from mesh_client import (
    ActorError,
    RemoteException,
    SupervisionError,
    default_bootstrap_cmd,
    options,
    this_host,
)
from tests.integration.local.actors import AsyncExits, FailingInit, RaisesUnpicklable, Recorder


def test_endpoint_error_carries_the_remote_traceback_and_the_actor_lives(procs):
    rec = procs.spawn("err", Recorder)
    one = rec.slice(hosts=0, gpus=1)
    with pytest.raises(ActorError) as info:
        one.fail.call_one("missing-key").get()
    err = info.value
    assert isinstance(err.exception, KeyError)
    assert "Actor call err.fail failed on t[hosts=0,gpus=1]" in str(err)
    assert "Remote traceback" in str(err) and "in fail" in str(err)
    assert one.echo.call_one("still alive").get() == "still alive"


def test_an_async_endpoint_error_traceback_starts_in_user_code(procs):
    actor = procs.slice(hosts=0, gpus=1).spawn("asyncerr", AsyncExits)
    with pytest.raises(ActorError) as info:
        actor.fail.call_one("missing-key").get(timeout=60)
    frames = [line for line in info.value.remote_traceback.splitlines() if line.startswith("  File ")]
    assert frames[0].endswith("in fail") and "actors.py" in frames[0], info.value.remote_traceback
    assert actor.ping.call_one().get(timeout=60) == "pong"


def test_call_raises_if_any_point_failed(procs):
    rec = procs.spawn("err2", Recorder)
    with pytest.raises(ActorError, match="KeyError"):
        rec.fail.call("x").get()


def test_unpicklable_exceptions_still_arrive(procs):
    actor = procs.spawn("unpick", RaisesUnpicklable).slice(hosts=0, gpus=0)
    with pytest.raises(ActorError) as info:
        actor.go.call_one().get()
    assert isinstance(info.value.exception, RemoteException)
    assert "Unpicklable: secret state" in str(info.value)


@pytest.mark.parametrize("method", ["exit_now", "exit_concurrently"])
def test_sys_exit_in_an_async_endpoint_fails_the_actor_as_in_a_def_one(procs, faults, method):
    """asyncio lets SystemExit end the thread of the actor's event loop: the call, and every
    later one, would wait for ever."""
    actor = procs.slice(hosts=1, gpus=0).spawn(f"exits_{method}", AsyncExits)
    with pytest.raises(SupervisionError, match=r"(?s)actor explicitly aborted due to: .*SystemExit: 3") as info:
        getattr(actor, method).call_one(3).get(timeout=60)
    assert "sys.exit(code)" in str(info.value)  # the remote traceback, in the user's code
    with pytest.raises(SupervisionError, match="SystemExit: 3"):
        actor.ping.call_one().get(timeout=60)
    assert len(faults.wait(f"exits_{method}")) == 1


def test_failing_init_fails_spawn_with_its_traceback_when_spawn_waits(procs, monkeypatch):
    monkeypatch.setattr(options, "spawn_waits", True)
    with pytest.raises(ActorError) as info:
        procs.spawn("broken", FailingInit)
    assert "__init__ of FailingInit" in str(info.value)
    assert "cannot build the model" in str(info.value)
    assert "in __init__" in str(info.value)


# Procs are forked from the zygote by default; a start-up variable makes the launcher exec them.
LAUNCHES = {"forked": None, "exec": default_bootstrap_cmd().with_env({"PYTHONHASHSEED": "0"})}


@pytest.mark.parametrize("launch", sorted(LAUNCHES))
def test_kill_9_fails_pending_and_later_calls_promptly(launch):
    with this_host().spawn_procs(per_host={"gpus": 2}, name="victim", bootstrap_command=LAUNCHES[launch]) as mesh:
        rec = mesh.spawn("rec", Recorder)
        doomed = rec.slice(gpus=1)
        pid = doomed.where.call_one().get()["pid"]
        pending = doomed.sleep.call_one(60)
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(SupervisionError) as info:
            pending.get(timeout=30)
        assert time.monotonic() - started < 30
        first = str(info.value)  # how it died, if the launcher knew soon enough
        assert "victim[gpus=1]" in first
        assert "killed by SIGKILL" in first or "exit status was not known yet" in first
        mesh._group.owner.processes[1].wait(timeout=30)
        with pytest.raises(SupervisionError, match="killed by SIGKILL"):
            doomed.echo.call_one(1).get(timeout=30)
        with pytest.raises(SupervisionError, match="victim\\[gpus=1\\]"):
            rec.echo.call(1).get(timeout=30)
        # the surviving proc still answers
        assert rec.slice(gpus=0).echo.call_one("ok").get(timeout=30) == "ok"


def test_get_with_timeout_raises_timeout(procs):
    rec = procs.spawn("slow", Recorder).slice(hosts=1, gpus=1)
    with pytest.raises(TimeoutError):
        rec.sleep.call_one(2).get(timeout=0.05)
