"""Monarch's ``enable_transport`` and ``shutdown_context()`` in a whole controller program.

Aspects: a program that starts with ``enable_transport("ipc")`` and ends with
``shutdown_context().get()`` runs; shutdown stops every proc mesh the program made and did not
stop (their processes are gone, their actors' calls fail), leaves alone what was stopped
already, and a second call gets a done future. It runs in a subprocess: shutdown is once per
process.
"""

import json
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import json
    import os
    from mesh_client import Actor, SupervisionError, enable_transport, endpoint, shutdown_context, this_host

    enable_transport("ipc")

    class Pid(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    a = this_host().spawn_procs(per_host={"gpus": 2}).spawn("a", Pid)
    b = this_host().spawn_procs(per_host={"gpus": 1}).spawn("b", Pid)
    stopped = this_host().spawn_procs(per_host={"gpus": 1})
    stopped.stop().get()
    pids = list(a.pid.call().get().values()) + [b.pid.call_one().get()]
    before = [alive(p) for p in pids]
    first = shutdown_context()
    first.get(timeout=60)
    try:
        b.pid.call_one().get(timeout=60)
        after_call = "answered"
    except SupervisionError:
        after_call = "SupervisionError"
    second = shutdown_context()
    print("RESULT " + json.dumps({"before": before, "after": [alive(p) for p in pids], "call": after_call,
                                  "second_done": second.done(), "distinct": second is not first}), flush=True)
''')


def test_a_program_with_enable_transport_and_shutdown_context():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    assert json.loads(line[len("RESULT "):]) == {
        "before": [True] * 3, "after": [False] * 3, "call": "SupervisionError", "second_done": True, "distinct": True}
