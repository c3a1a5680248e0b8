"""Calls whose waits wake ahead of the reply (runtime/ahead.py): a controller started here with
PROCMESH_WAKE_AHEAD_US=200 (a wait of 2 ms or more counts as long) calls naps of 50 and 300 ms,
so that its waits and its procs' wake ahead for certain, and reports what it saw: results,
order, fan-outs, a timeout, a Ctrl-C and a proc's death while woken ahead, what each endpoint
of a loop that takes turns expects, and a proc whose own environment turns waking ahead off.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])

CONTROLLER = textwrap.dedent(
    """
    import asyncio, json, os, signal, threading, time
    import mesh_client.actor
    from mesh_client import Actor, SupervisionError, concurrent_endpoint, default_bootstrap_cmd, endpoint, this_host
    from mesh_client._src.runtime import ahead, waits

    class Napper(Actor):
        @endpoint
        def nap(self, seconds):
            time.sleep(seconds)
            return seconds

        @endpoint
        def doze(self, seconds):
            time.sleep(seconds)
            return seconds

        @endpoint
        def add(self, i):
            return i + 1

        @endpoint
        def woken(self):
            return [ahead.woken, waits.WAKE_AHEAD_NS]

        @endpoint
        def pid(self):
            return os.getpid()

    class Porter(Actor):  # replies through an explicit port from the actor's thread, inside the endpoint

        @endpoint(explicit_response_port=True)
        def nap(self, port, seconds):
            time.sleep(seconds)
            port.send(seconds)

        @endpoint(explicit_response_port=True)
        def add(self, port, i):
            port.send(i + 1)

        @endpoint
        def woken(self):
            return ahead.woken

    class Looper(Actor):
        # Concurrent endpoints: their replies (a port's too) go out from the actor's loop. A
        # loop runs one task at a time: woken() reads after what came before.

        @concurrent_endpoint
        async def nap(self, seconds):
            await asyncio.sleep(seconds)
            return seconds

        @concurrent_endpoint(explicit_response_port=True)
        async def nap_port(self, port, seconds):
            await asyncio.sleep(seconds)
            port.send(seconds)

        @concurrent_endpoint
        async def add(self, i):
            return i + 1

        @endpoint
        async def woken(self):
            return ahead.woken

    class Waiter(Actor):
        # async def endpoints the actor's thread waits for (they run on its loop), then replies.

        @endpoint
        async def nap(self, seconds):
            await asyncio.sleep(seconds)
            return seconds

        @endpoint
        async def add(self, i):
            return i + 1

        @endpoint
        async def woken(self):
            return ahead.woken

    def proc_woken_by(actor, fn):
        # What fn returned, and how often the proc of actor (it alone at work there) woke
        # ahead meanwhile: read through the actor, after what it did.
        before = actor.woken.call_one().get()
        value = fn()
        return value, actor.woken.call_one().get() - before

    def woken_by(fn):
        before = ahead.woken
        value = fn()
        return value, ahead.woken - before

    mesh_client.actor.unhandled_fault_hook = lambda failure: None  # the kill below is expected
    out = {"controller_ahead_ns": waits.WAKE_AHEAD_NS}
    with this_host().spawn_procs(per_host={"gpus": 2}, name="ahead") as procs:
        nappers = procs.spawn("napper", Napper)
        one = nappers.slice(gpus=0)
        proc_before, out["proc_ahead_ns"] = one.woken.call_one().get()
        # 50 ms, then 300 ms: the second wait expects 50 ms and wakes ahead, surely.
        out["naps"], out["naps_woken"] = woken_by(lambda: [one.nap.call_one(s).get() for s in (0.05, 0.3, 0.3)])
        out["proc_woken"] = one.woken.call_one().get()[0] - proc_before  # after each of the 3 long calls
        # Taking turns on one thread (a policy's generate, a trainer's train): each endpoint
        # expects its own wait, whatever slice it is called through; quick calls between clear neither.
        for _ in range(3):
            one.nap.call_one(0.05).get()
            one.add.call_one(0).get()
            one.doze.call_one(0.3).get()
        out["turns_expected_ms"] = [ahead.due(0, e._key) / 1e6 for e in (one.nap, one.doze, nappers.doze)]
        out["sequential"] = [one.add.call_one(i).get() for i in range(300)]  # quick ones after long ones
        futures = [one.add.call_one(i) for i in range(1000)]
        out["pipelined"] = [f.get() for f in futures]
        one.nap.call_one(0.05).get()
        out["fanouts"], out["fanouts_woken"] = woken_by(
            lambda: [sorted(nappers.nap.call(s).get().values()) for s in (0.05, 0.3)])
        # A timeout after the wait woke ahead (expecting 50 ms).
        one.nap.call_one(0.05).get()
        try:
            one.nap.call_one(1.0).get(timeout=0.2)
            out["timeout"] = "no TimeoutError"
        except TimeoutError as exc:
            out["timeout"] = str(exc)
        # A Ctrl-C while the main thread waits, woken ahead (expecting 50 ms) and then asleep.
        victim = nappers.slice(gpus=1)
        victim_pid = victim.pid.call_one().get()
        victim.nap.call_one(0.05).get()
        main = threading.main_thread().ident
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        started = time.monotonic()
        try:
            victim.nap.call_one(60.0).get()
            out["ctrl_c"] = "no KeyboardInterrupt"
        except KeyboardInterrupt:
            out["ctrl_c"] = "KeyboardInterrupt"
        out["ctrl_c_within_s"] = time.monotonic() - started
        # The proc dies while a call to it waits, woken ahead.
        one.nap.call_one(0.05).get()
        pending = victim.add.call_one(1)  # queued behind the 60 s nap
        threading.Timer(0.3, os.kill, (victim_pid, signal.SIGKILL)).start()
        started = time.monotonic()
        try:
            pending.get(timeout=20)
            out["killed"] = "no error"
        except SupervisionError as exc:
            out["killed"] = type(exc).__name__
        out["killed_within_s"] = time.monotonic() - started
    # Replies sent after the endpoint's own: a port's, a concurrent endpoint's. Each actor on a
    # proc of its own (another's wake-up after its reply could come after the reads here), which
    # wakes 5 ms ahead: a call of 50 ms or more is long, a quick one (a hand-off to the loop
    # included) is not, however busy the machine.
    slow = default_bootstrap_cmd().with_env({"PROCMESH_WAKE_AHEAD_US": "5000"})
    with this_host().spawn_procs(per_host={"gpus": 3}, bootstrap_command=lambda point: slow, name="later") as procs:
        porter = procs.slice(gpus=0).spawn("porter", Porter)
        looper = procs.slice(gpus=1).spawn("looper", Looper)
        waiter = procs.slice(gpus=2).spawn("waiter", Waiter)
        for actor in (porter, looper, waiter):
            actor.woken.call_one().get()  # a first call (a loop made) may be long: it wakes ahead
        for name, actor in (("port", porter), ("concurrent", looper), ("async", waiter)):
            out[name] = proc_woken_by(actor, lambda: [actor.nap.call_one(s).get() for s in (0.1, 0.3, 0.3)])
            out[name + "_quick"] = proc_woken_by(actor, lambda: [actor.add.call_one(i).get() for i in range(100)])
        out["concurrent_port"] = proc_woken_by(
            looper, lambda: [looper.nap_port.call_one(s).get() for s in (0.1, 0.3, 0.3)])
    # A proc's own PROCMESH_WAKE_AHEAD_US counts, also where it is forked from the zygote.
    off = default_bootstrap_cmd().with_env({"PROCMESH_WAKE_AHEAD_US": "0"})
    with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=lambda point: off, name="off") as procs:
        napper = procs.spawn("napper", Napper)
        before = napper.woken.call_one().get()
        napper.nap.call_one(0.05).get()
        out["off_proc_woken"] = [napper.woken.call_one().get()[0] - before[0], before[1]]
        looper = procs.spawn("looper", Looper)
        out["off_later_woken"] = proc_woken_by(looper, lambda: [looper.nap.call_one(0.05).get(),
                                                                looper.nap_port.call_one(0.05).get()])[1]
        waiter = procs.spawn("waiter", Waiter)
        out["off_async_woken"] = proc_woken_by(waiter, lambda: [waiter.nap.call_one(s).get() for s in (0.05, 0.3)])[1]
    print(json.dumps(out))
    """
)


def test_calls_that_wake_ahead_keep_their_results_order_timeouts_and_failures(tmp_path):
    script = tmp_path / "controller.py"
    script.write_text(CONTROLLER)
    env = dict(os.environ, PYTHONPATH=ROOT, PROCMESH_WAKE_AHEAD_US="200")
    # SIGINT as a terminal's program has it, whatever the runner of these tests inherited
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=240,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # Where the native waits are built (test_waits checks that they are): 200 us everywhere.
    assert out["controller_ahead_ns"] == out["proc_ahead_ns"] == 200_000
    assert out["naps"] == [0.05, 0.3, 0.3]
    assert out["naps_woken"] >= 1  # the 300 ms reply came after the 50 ms expected
    assert out["proc_woken"] == 3  # the proc woke its I/O thread after each long call
    nap_ms, doze_ms, doze_whole_mesh_ms = out["turns_expected_ms"]
    assert 50 - 0.2 <= nap_ms < 300 - 0.2  # its shortest recent wait: about 50 ms, not the doze's
    assert doze_ms >= 300 - 0.2 and doze_whole_mesh_ms == doze_ms
    assert out["sequential"] == list(range(1, 301))
    assert out["pipelined"] == list(range(1, 1001))
    assert out["fanouts"] == [[0.05, 0.05], [0.3, 0.3]]
    assert out["fanouts_woken"] >= 1
    assert out["timeout"] == "no result within 0.2 s"
    assert out["ctrl_c"] == "KeyboardInterrupt"
    assert out["ctrl_c_within_s"] < 60  # raised by the signal, not once the 60 s nap ended
    assert out["killed"] == "SupervisionError"
    assert out["killed_within_s"] < 20  # failed on the proc's death, not by the bounded wait
    assert out["off_proc_woken"] == [0, 0]
    # A reply sent later (a port's, a concurrent endpoint's from the actor's loop) woke the
    # proc's I/O thread after each long call, and never after a quick one.
    assert out["port"] == [[0.1, 0.3, 0.3], 3]
    assert out["concurrent"] == [[0.1, 0.3, 0.3], 3]
    assert out["concurrent_port"] == [[0.1, 0.3, 0.3], 3]
    assert out["port_quick"] == out["concurrent_quick"] == [list(range(1, 101)), 0]
    assert out["off_later_woken"] == 0
    # An async def endpoint: the actor's thread woke ahead of its end where it expected 100 ms
    # and it took 300 (each of the two later calls, unless the thread ran 200 ms late), then
    # after each reply as before (3); quick ones never, nor where waking ahead is off.
    naps, woken = out["async"]
    assert naps == [0.1, 0.3, 0.3] and 4 <= woken <= 5
    assert out["async_quick"] == [list(range(1, 101)), 0]
    assert out["off_async_woken"] == 0
