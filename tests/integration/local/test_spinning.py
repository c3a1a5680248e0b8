"""Calls with the waits spinning (PROCMESH_SPIN_US), as they do by default on hosts of 8 cores
or more: this machine may have fewer, so a controller started here with spinning forced on runs
the adverbs, ordering, timeouts, a Ctrl-C and a proc's death, and reports what it saw.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from mesh_client._src.runtime import waits

ROOT = str(Path(__file__).resolve().parents[3])

CONTROLLER = textwrap.dedent(
    """
    import json, os, signal, threading, time
    import mesh_client.actor
    from mesh_client import Actor, SupervisionError, default_bootstrap_cmd, endpoint, this_host
    from mesh_client._src.runtime import waits

    class Spun(Actor):
        def __init__(self):
            self.seen = []

        @endpoint
        def add(self, i):
            self.seen.append(i)
            return i + 1

        @endpoint
        def seen_so_far(self):
            return self.seen

        @endpoint
        def spin_ns(self):
            return [waits.SPIN_NS, waits.POLL_SPIN_NS]

        @endpoint
        def pid(self):
            return os.getpid()

        @endpoint
        def nap(self, seconds):
            time.sleep(seconds)

    mesh_client.actor.unhandled_fault_hook = lambda failure: None  # the kill below is expected
    out = {"controller_spin_ns": [waits.SPIN_NS, waits.POLL_SPIN_NS]}
    with this_host().spawn_procs(per_host={"gpus": 3}, name="spin") as procs:
        actors = procs.spawn("spun", Spun)
        one = actors.slice(gpus=0)
        out["proc_spin_ns"] = sorted(actors.spin_ns.call().get().values())
        out["sequential"] = [one.add.call_one(i).get() for i in range(500)]
        futures = [one.add.call_one(i) for i in range(3000)]
        out["pipelined"] = [f.get() for f in futures]
        out["order_kept"] = one.seen_so_far.call_one().get() == list(range(500)) + list(range(3000))
        out["fanouts"] = [sorted(actors.add.call(i).get().values()) for i in range(200)]
        try:
            one.nap.call_one(2.0).get(timeout=0.05)
            out["timeout"] = "no TimeoutError"
        except TimeoutError as exc:
            out["timeout"] = str(exc)
        # A Ctrl-C while the main thread waits (spinning, then asleep) for a long call.
        main = threading.main_thread().ident
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        started = time.monotonic()
        try:
            actors.slice(gpus=1).nap.call_one(60.0).get()
            out["ctrl_c"] = "no KeyboardInterrupt"
        except KeyboardInterrupt:
            out["ctrl_c"] = "KeyboardInterrupt"
        out["ctrl_c_within_s"] = time.monotonic() - started
        victim = actors.slice(gpus=2)
        victim_pid = victim.pid.call_one().get()
        pending = victim.nap.call_one(30.0)
        time.sleep(0.2)  # the nap has begun: its caller waits (spinning, then asleep)
        os.kill(victim_pid, signal.SIGKILL)
        started = time.monotonic()
        try:
            pending.get(timeout=20)
            out["killed"] = "no error"
        except SupervisionError as exc:
            out["killed"] = type(exc).__name__
        out["killed_within_s"] = time.monotonic() - started
    # A proc's own PROCMESH_SPIN_US counts, also where it is forked from the zygote.
    quiet = default_bootstrap_cmd().with_env({"PROCMESH_SPIN_US": "0"})
    with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=lambda point: quiet, name="quiet") as procs:
        out["quiet_proc_spin_ns"] = procs.spawn("spun", Spun).spin_ns.call_one().get()
    print(json.dumps(out))
    """
)


def test_calls_with_spinning_waits_keep_their_results_order_timeouts_and_failures(tmp_path):
    script = tmp_path / "controller.py"
    script.write_text(CONTROLLER)
    env = dict(os.environ, PYTHONPATH=ROOT, PROCMESH_SPIN_US="200")
    # SIGINT as a terminal's program has it, whatever the runner of these tests inherited
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=240,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["controller_spin_ns"] == [200_000, 200_000] and out["proc_spin_ns"] == [[200_000, 200_000]] * 3
    assert out["quiet_proc_spin_ns"] == [0, 0]
    assert out["sequential"] == list(range(1, 501))
    assert out["pipelined"] == list(range(1, 3001))
    assert out["order_kept"] is True
    assert out["fanouts"] == [[i + 1] * 3 for i in range(200)]
    assert out["timeout"] == "no result within 0.05 s"
    assert out["ctrl_c"] == "KeyboardInterrupt"
    assert out["ctrl_c_within_s"] < 60  # raised by the signal, not once the 60 s nap ended
    assert out["killed"] == "SupervisionError"
    assert out["killed_within_s"] < 20  # failed on the proc's death, not by the bounded wait


SMALL_HOST = textwrap.dedent(
    """
    import json, os
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])  # a 2-core host, procs included
    from mesh_client import Actor, default_bootstrap_cmd, endpoint, this_host
    from mesh_client._src.runtime import cores, waits

    class Spins(Actor):
        @endpoint
        def spins(self):
            return [cores.usable_cores(), waits.SPIN_NS, waits.POLL_SPIN_NS]

    out = {"controller": [cores.usable_cores(), waits.SPIN_NS, waits.POLL_SPIN_NS]}
    with this_host().spawn_procs(per_host={"gpus": 2}, name="small") as procs:
        out["procs"] = sorted(procs.spawn("spins", Spins).spins.call().get().values())
    quiet = default_bootstrap_cmd().with_env({"PROCMESH_SPIN_US": "0"})
    with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=lambda point: quiet, name="quiet") as procs:
        out["quiet"] = procs.spawn("spins", Spins).spins.call_one().get()
    print(json.dumps(out))
    """
)


def test_on_a_small_host_only_the_io_threads_poll_spins_by_default(tmp_path):
    """Below 8 usable cores a process's I/O thread alone spins (SMALL_HOST_POLL_SPIN_US): in the
    controller, and in procs forked from the zygote, unless their own environment says 0."""
    script = tmp_path / "small_host.py"
    script.write_text(SMALL_HOST)
    # The defaults, procs forked from the zygote (PROCMESH_ZYGOTE unset: on)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCMESH_SPIN_US", "PROCMESH_POLL_SPIN_US", "PROCMESH_ZYGOTE")}
    env["PYTHONPATH"] = ROOT
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    cores = out["controller"][0]  # 2, unless this machine lets a process use only one
    small = [cores, *waits.spins_from({}, cores)]
    if cores == 2:
        assert small == [2, 0, waits.SMALL_HOST_POLL_SPIN_US * 1000]
    assert out["controller"] == small
    assert out["procs"] == [small, small]
    assert out["quiet"] == [cores, 0, 0]
