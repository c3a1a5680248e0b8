"""LocalProcs.explain: how a proc ended, only if its exit status is known by the deadline.

Aspects: a proc still running past the deadline is named (label, pid) with the connection's
reason and no exit story; a proc that died and was reaped is said to be killed by its signal.
Real processes (a sleeping Python), no mocks.
"""

import signal
import subprocess
import sys
import time

from mesh_client._src.local import launcher


def procs_of(proc):
    owner = launcher.LocalProcs("m", [{"gpus": 0}], ["m[gpus=0]"], None, "token")
    owner.processes.append(proc)
    owner.spawned = True  # spawn_procs returned: the way on is a respawn (before: spawn again)
    return owner


def test_a_running_proc_past_the_deadline_is_named_without_a_story():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owner = procs_of(proc)
    try:
        message = owner.explain(0, "the link dropped", deadline=time.monotonic() - 1)
        assert message == (f"lost the connection to proc m[gpus=0] (pid {proc.pid}; its exit "
                           f"status was not known yet): the link dropped; {launcher.NO_RESTARTS}")
        assert proc.poll() is None  # explaining never touches the proc
    finally:
        owner.kill()


def test_a_killed_proc_is_said_to_be_killed_by_its_signal():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owner = procs_of(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert owner.explain(0, "the link dropped", deadline=time.monotonic() - 1) == \
        f"Killed(sig=9): proc m[gpus=0] (pid {proc.pid}) killed by SIGKILL; {launcher.NO_RESTARTS}"  # Monarch's words first
    owner.kill()
