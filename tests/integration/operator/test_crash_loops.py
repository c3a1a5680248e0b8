"""A proc that fails at once is restarted with a growing back-off, not as fast as pods can be made.

The proc server really fails at start: its pod's env sets PYTHONHASHSEED to what Python refuses
(it exits 1 before running anything), as a bad import or a missing file would. The operator is
restarted with small back-offs for these tests. Nothing here measures time: the back-off each
restart waited is read from its ProcFailed event (the operator's decision, written with the
restart), the wait itself from the status while it lasts, and a new operator is shown to keep
its predecessor's decision by restarting with the back-off that one chose, not its own.
"""

import datetime
import re
import signal

import pytest

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

#: Python refuses to start with this (exit code 1): a proc that fails at once, every time.
CRASH = {"env": [{"name": "PYTHONHASHSEED", "value": "not-a-number"}]}


def parse_time(stamp):
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def waited_back_offs(core, namespace, name):
    """Each restart's back-off by restart number, from the ProcFailed events (0: at once)."""
    out = {}
    for e in support.events(core, namespace, name):
        found = re.search(r"\(restart (\d+)\)(?: after a back-off of (\d+) s)?", e.message or "")
        if e.reason == "ProcFailed" and found:
            out[int(found[1])] = int(found[2] or 0)
    return out


@pytest.mark.parametrize("policy,size", [("RestartProc", 1), ("RestartMesh", 2)])
def test_a_crash_looping_proc_waits_a_growing_back_off_until_its_restarts_are_used_up(
        operator, namespace, custom, core, policy, size):
    with support.session_operator_with(operator, "--restart-backoff-seconds", "2",
                                       "--restart-backoff-max-seconds", "4"):
        support.create_mesh(custom, namespace, "looping", perHost=[{"name": "procs", "size": size}],
                            restartPolicy=policy, maxRestarts=4, template=CRASH)
        mesh = support.wait_condition(custom, namespace, "looping", "Degraded", "True",
                                      "RestartLimitReached")
        assert mesh["status"]["restarts"] == 4
        assert "(exit code 1, Error" in support.condition(mesh, "Degraded")["message"]
        # The first restart at once, then 2 s, doubling to the 4 s cap (under RestartMesh, the
        # mesh's failures make the row); the fifth failure is kept (the limit), its pods too.
        back_offs = testing.wait_for(
            lambda: (b := waited_back_offs(core, namespace, "looping")) and len(b) == 4 and b,
            "a ProcFailed event per restart")
        assert back_offs == {1: 0, 2: 2, 3: 4, 4: 4}
        loops = mesh["status"]["crashLoops"]
        assert loops and {(loop["failures"], loop["backOffSeconds"]) for loop in loops} == {(4, 4)}
        pods = testing.wait_for(
            lambda: (ps := support.mesh_pods(core, namespace, "looping"))
            and [p.status.phase for p in ps] == ["Failed"] * size and ps,
            "every proc of the last run failed (and kept)")
        assert not {p.metadata.uid for p in pods} & {loop["podUID"] for loop in loops}
        # The last restart waited: its pods were made no earlier than the time it was due.
        [due] = {loop["restartTime"] for loop in loops}
        assert all(p.metadata.creation_timestamp >= parse_time(due) for p in pods), \
            (due, [p.metadata.creation_timestamp for p in pods])


def test_the_back_off_shows_in_the_status_and_outlives_its_operator(operator, namespace, custom,
                                                                     core):
    with support.session_operator_with(operator, "--restart-backoff-seconds", "30"):
        support.create_mesh(custom, namespace, "waits", perHost=[{"name": "procs", "size": 1}],
                            restartPolicy="RestartProc", maxRestarts=2, template=CRASH)
        # Restarted once at once; failed again: its second restart waits 30 s.
        mesh = support.wait_condition(custom, namespace, "waits", "Ready", "False",
                                      "CrashLoopBackOff")
        status = mesh["status"]
        [loop] = status["crashLoops"]
        assert (loop["failures"], loop["backOffSeconds"]) == (2, 30)
        ready = support.condition(mesh, "Ready")["message"]
        # (The process node adds its word on the pod, after the container's.)
        assert ready.startswith("0 of 1 procs ready; proc 0 (exit code 1, Error"), ready
        assert (f") failed 2 times in a row: the operator restarts it at {loop['restartTime']}, "
                f"after a back-off of 30 s (restartPolicy RestartProc, 1 of at most 2 restarts "
                f"used") in ready, ready
        progressing = support.condition(mesh, "Progressing")
        assert (progressing["status"], progressing["reason"]) == ("True", "CrashLoopBackOff")
        assert status["phase"] == "Waiting" and status["restarts"] == 1
        [pod] = support.mesh_pods(core, namespace, "waits")  # kept, to be read, while it waits
        assert pod.metadata.uid == loop["podUID"] and pod.status.phase == "Failed"
        assert testing.wait_for(
            lambda: [e for e in support.events(core, namespace, "waits")
                     if e.reason == "CrashLoopBackOff"], "the back-off's event")[0].type == "Warning"

        # A new operator (the old one killed mid-wait) with another back-off and no resync:
        # it restarts the proc when the recorded back-off ends, by its own requeue.
        operator.stop(signal.SIGKILL)
        operator.start("--restart-backoff-seconds", "1", "--resync-seconds", "3600")
        mesh = support.wait_condition(custom, namespace, "waits", "Degraded", "True",
                                      "RestartLimitReached")
        assert mesh["status"]["restarts"] == 2
        back_offs = testing.wait_for(
            lambda: (b := waited_back_offs(core, namespace, "waits")) and len(b) == 2 and b,
            "a ProcFailed event per restart")
        assert back_offs == {1: 0, 2: 30}
