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
from tests.integration.cli import support as cli
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


def test_a_restart_mesh_waiting_its_back_off_stops_its_healthy_procs_and_counts_once(
        operator, namespace, custom, core):
    """Under RestartMesh a crash-looping mesh is replaced whole when its back-off ends, so its
    healthy procs stop when the wait starts (they held their GPUs and memory, their SPMD peers
    hung on the failed rank): their pods are deleted, uncounted; the failed pod is kept to
    show why. An operator killed mid-wait is followed by one that restarts the whole mesh when
    the recorded back-off ends, counting that restart once."""
    with support.session_operator_with(operator, "--restart-backoff-seconds", "60"):
        support.create_mesh(custom, namespace, "stops", perHost=[{"name": "procs", "size": 2}],
                            restartPolicy="RestartMesh", maxRestarts=3)
        mesh = support.wait_ready(custom, namespace, "stops")
        support.kill_proc(mesh["status"]["procs"][1]["address"],
                          support.token(core, namespace, "stops"))
        # The first failure of a row: restarted at once.
        mesh = testing.wait_for(
            lambda: (m := support.get_mesh(custom, namespace, "stops"))["status"]["restarts"] == 1
            and support.condition(m, "Ready").get("status") == "True" and m,
            "the first restart made, the mesh Ready again")
        before = {p.metadata.name: p.metadata.uid for p in support.mesh_pods(core, namespace, "stops")}
        support.kill_proc(mesh["status"]["procs"][1]["address"],
                          support.token(core, namespace, "stops"))
        mesh = support.wait_condition(custom, namespace, "stops", "Ready", "False",
                                      "CrashLoopBackOff")
        [loop] = mesh["status"]["crashLoops"]
        assert (loop["rank"], loop["failures"], loop["backOffSeconds"]) == (1, 2, 60)
        assert loop["podUID"] == before["stops-1"]
        # The healthy proc stops (its pod deleted); the failed one's pod stays, Failed.
        [pod] = testing.wait_for(
            lambda: (ps := support.mesh_pods(core, namespace, "stops"))
            and [p.metadata.name for p in ps] == ["stops-1"] and ps,
            "the healthy proc's pod deleted, the failed one's kept")
        assert pod.metadata.uid == loop["podUID"] and pod.status.phase == "Failed"
        assert not pod.metadata.deletion_timestamp
        mesh = support.get_mesh(custom, namespace, "stops")
        assert mesh["status"]["restarts"] == 1, mesh["status"]  # neither counted nor restarted yet
        ready = support.condition(mesh, "Ready")
        assert ready["reason"] == "CrashLoopBackOff", ready
        assert "the mesh's other 1 proc is stopped until then (deleted, not counted as failed)" \
            in ready["message"], ready
        # Its entry goes from Terminating to no pod: a stop of the operator's, not a lost proc.
        testing.wait_for(lambda: "podPhase" not in support.get_mesh(
            custom, namespace, "stops")["status"]["procs"][0], "rank 0's entry without a pod")

        # A new operator (the old one killed mid-wait) with another back-off and no resync
        # restarts the whole mesh when the recorded back-off ends, counted once.
        operator.stop(signal.SIGKILL)
        operator.start("--restart-backoff-seconds", "1", "--resync-seconds", "3600")
        mesh = testing.wait_for(
            lambda: (m := support.get_mesh(custom, namespace, "stops"))
            and support.condition(m, "Ready").get("status") == "True"
            and m["status"]["restarts"] >= 2 and m,
            "the whole mesh restarted after the back-off")
        assert mesh["status"]["restarts"] == 2
        pods = support.mesh_pods(core, namespace, "stops")
        assert sorted(p.metadata.name for p in pods) == ["stops-0", "stops-1"]
        assert not {p.metadata.uid for p in pods} & set(before.values())
        assert all(p.metadata.creation_timestamp >= parse_time(loop["restartTime"]) for p in pods)
        back_offs = testing.wait_for(
            lambda: (b := waited_back_offs(core, namespace, "stops")) and len(b) == 2 and b,
            "a ProcFailed event per restart")
        assert back_offs == {1: 0, 2: 60}


def test_deleting_the_failed_pod_of_a_restart_mesh_waiting_its_back_off_restarts_it_at_once(
        cluster, operator, namespace, custom, core):
    """README: while a mesh waits out its back-off, deleting its failed pod restarts it at
    once. Under RestartMesh its other procs are stopped by then (their pods deleted, their
    entries without a pod, ``procmesh describe`` showing them Stopped): the delete restarts the
    whole mesh, counted once, not after the back-off (an hour here, so only the delete can end
    it)."""
    with support.session_operator_with(operator, "--restart-backoff-seconds", "3600"):
        support.create_mesh(custom, namespace, "cut", perHost=[{"name": "procs", "size": 2}],
                            restartPolicy="RestartMesh", maxRestarts=3)
        mesh = support.wait_ready(custom, namespace, "cut")
        for restarts in (1, 2):  # the second failure in a row waits
            support.kill_proc(mesh["status"]["procs"][1]["address"], support.token(core, namespace, "cut"))
            if restarts == 1:
                mesh = testing.wait_for(
                    lambda: (m := support.get_mesh(custom, namespace, "cut"))["status"]["restarts"] == 1
                    and support.condition(m, "Ready").get("status") == "True" and m, "the first restart")
        support.wait_condition(custom, namespace, "cut", "Ready", "False", "CrashLoopBackOff")
        testing.wait_for(lambda: "podPhase" not in support.get_mesh(
            custom, namespace, "cut")["status"]["procs"][0], "rank 0 stopped, its entry without a pod")
        [failed] = support.mesh_pods(core, namespace, "cut")
        assert failed.metadata.name == "cut-1" and failed.status.phase == "Failed"
        described = cli.procmesh(cluster.kubeconfig, "describe", "cut", "-n", namespace)
        assert described.returncode == 0, described.stderr
        stopped = [line for line in described.stdout.splitlines() if "Stopped (CrashLoopBackOff)" in line]
        assert len(stopped) == 1 and stopped[0].split()[0] == "0" and "cut-0" in stopped[0], described.stdout
        core.delete_namespaced_pod("cut-1", namespace)
        mesh = testing.wait_for(
            lambda: (m := support.get_mesh(custom, namespace, "cut"))
            and support.condition(m, "Ready").get("status") == "True" and m, "the whole mesh restarted")
        assert mesh["status"]["restarts"] == 2, mesh["status"]
        pods = support.mesh_pods(core, namespace, "cut")
        assert sorted(p.metadata.name for p in pods) == ["cut-0", "cut-1"]
        assert failed.metadata.uid not in {p.metadata.uid for p in pods}
