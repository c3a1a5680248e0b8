"""The restart back-off of crash-looping procs (procmesh_operator.crashloops), through the pure
plan: the first failure of a row restarts at once, the next ones wait a doubling back-off up to
the cap, a proc that ran long starts a new row, a decision stands across operators (it is read
back from the status), the restart limit still holds, and what is not a proc's own failure (a
lost pod, a drain) never waits. No clock is read: ``now`` is given."""

import datetime

import pytest

from mesh_client._src import contract
from procmesh_operator import crashloops, eventing, names, planning, settings, statuses

from .builders import mesh, pod

FAST = settings.Settings(restart_backoff_seconds=10, restart_backoff_max_seconds=40,
                         restart_backoff_reset_seconds=600)
T0 = 1_800_000_000.0  # epoch seconds, a whole second


def stamp(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def crashed(m, rank, uid, *, started, ran=1.0, exit_code=1):
    """A proc pod whose container started at ``started`` and exited after ``ran`` seconds."""
    body = pod(m, rank, phase="Failed", ready=False, uid=uid)
    body["metadata"]["creationTimestamp"] = stamp(started - 1)
    body["status"]["containerStatuses"] = [{"name": "proc", "state": {"terminated": {
        "exitCode": exit_code, "reason": "Error", "startedAt": stamp(started),
        "finishedAt": stamp(started + ran)}}}]
    return body


def plan(m, pods, *, now, loops=None, restarts=0, **kw):
    return planning.plan(m, restarts=restarts, pods=pods, settings=FAST, now=now,
                         crash_loops=loops, **kw)


def written(p):
    """The plan's entries as the next operator reads them back from the status."""
    return crashloops.read({contract.CRASH_LOOPS_STATUS_FIELD: crashloops.render(p.crash_loops)})


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_a_proc_failing_in_a_row_waits_a_doubling_back_off_up_to_the_cap(policy):
    m = mesh(restartPolicy=policy, maxRestarts=100)
    loops, restarts, started, gaps = None, 0, T0, []
    for attempt in range(1, 6):
        pods = {0: pod(m, 0), 1: crashed(m, 1, f"uid-{attempt}", started=started)}
        ended = started + 1
        p = plan(m, pods, now=ended, loops=loops, restarts=restarts)
        if p.backoff:
            assert p.restarts == restarts and not p.creates and not p.marks  # the pod is kept
            # (under RestartMesh the healthy peer stops while the mesh waits: see below)
            assert p.deletes == (() if policy == "RestartProc" else (("m-0", "pod-uid-m-0"),))
            assert p.recheck == pytest.approx(p.backoff[1].restart_at - ended)
            again = plan(m, pods, now=ended + 1, loops=written(p), restarts=restarts)
            assert again.backoff == p.backoff  # the same decision, read back from the status
            due = p.backoff[1].restart_at
            gaps.append(due - ended)
            p = plan(m, pods, now=due, loops=written(p), restarts=restarts)
        else:
            gaps.append(0)
        assert not p.backoff and p.restarts == restarts + 1
        assert pods[1]["metadata"]["name"] in [name for name, _ in p.deletes]
        loops, restarts, started = written(p), p.restarts, started + 100
    assert gaps == [0, 10, 20, 40, 40]


def test_a_proc_that_ran_long_before_it_failed_is_restarted_at_once():
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 4, 40, T0 - 1000)}
    p = plan(m, {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0, ran=600)},
             now=T0 + 601, loops=loops)
    assert not p.backoff and p.restarts == 1
    assert written(p)[1].failures == 1
    p = plan(m, {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0, ran=5)},
             now=T0 + 6, loops=loops)
    assert p.backoff[1].failures == 5 and p.backoff[1].back_off == 40


def test_a_start_error_counts_as_no_run():
    """The kubelet reports a container that never started with startedAt 1970."""
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    failed = crashed(m, 1, "uid-now", started=T0)
    failed["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"] = \
        "1970-01-01T00:00:00Z"
    assert crashloops.ran_seconds(failed) == 0
    loops = {1: crashloops.CrashLoop(1, "uid-before", 1, 0, 0)}
    assert plan(m, {0: pod(m, 0), 1: failed}, now=T0 + 2, loops=loops).backoff[1].failures == 2


def test_the_restart_limit_holds_before_any_back_off():
    m = mesh(restartPolicy="RestartProc", maxRestarts=2)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 2, 10, T0 - 100)}
    p = plan(m, {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0)}, now=T0 + 1,
             loops=loops, restarts=2)
    assert p.restart_limit_reached and p.failed == (1,) and not p.backoff


def test_a_lost_proc_and_a_drained_one_never_wait():
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 3, 20, T0 - 100)}
    p = plan(m, {0: pod(m, 0)}, now=T0, loops=loops, last_phases={0: "Running", 1: "Running"})
    assert not p.backoff and p.restarts == 1 and 1 in p.creates
    drained = pod(m, 1, uid="uid-now", terminating=True)
    drained["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                            "reason": "EvictionByEvictionAPI"})
    p = plan(m, {0: pod(m, 0), 1: drained}, now=T0, loops=loops,
             last_phases={0: "Running", 1: "Running"})
    assert not p.backoff and p.restarts == 0


def test_a_decision_stands_for_the_pod_it_was_made_for():
    """An operator that restarts (or a new leader) waits out the same back-off, whatever its
    settings or clock say now."""
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    failed = crashed(m, 1, "uid-now", started=T0)
    loops = {1: crashloops.CrashLoop(1, "uid-now", 3, 20, T0 + 21)}
    p = plan(m, {0: pod(m, 0), 1: failed}, now=T0 + 5, loops=loops)
    assert p.backoff[1] == loops[1] and p.recheck == pytest.approx(16)
    assert plan(m, {0: pod(m, 0), 1: failed}, now=T0 + 21, loops=loops).restarts == 1


def test_an_entry_goes_once_its_new_pod_was_ready_for_the_reset_time_or_with_a_suspend():
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 3, 20, T0)}
    running = pod(m, 1, uid="uid-now")
    running["status"]["conditions"][0]["lastTransitionTime"] = stamp(T0)
    assert written(plan(m, {0: pod(m, 0), 1: running}, now=T0 + 599, loops=loops)) == loops
    assert written(plan(m, {0: pod(m, 0), 1: running}, now=T0 + 600, loops=loops)) == {}
    suspended = mesh(restartPolicy="RestartProc", maxRestarts=100, suspend=True)
    assert written(plan(suspended, {0: pod(m, 0), 1: running}, now=T0, loops=loops)) == {}


def test_a_failed_proc_restarted_at_once_changes_nothing_else():
    """No back-off for the first failure: the plan is today's, plus the entry it records."""
    m = mesh(restartPolicy="RestartProc", maxRestarts=3)
    pods = {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0)}
    p = plan(m, pods, now=T0 + 2)
    assert p.restarts == 1 and p.deletes == (("m-1", "uid-now"),) and not p.backoff
    assert p.recheck is None
    assert crashloops.render(p.crash_loops) == [
        {"rank": 1, "podUID": "uid-now", "failures": 1, "backOffSeconds": 0}]


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_the_status_says_which_procs_wait_how_long_and_why(policy):
    m = mesh(restartPolicy=policy, maxRestarts=100)
    pods = {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0, exit_code=3)}
    loops = {1: crashloops.CrashLoop(1, "uid-before", 2, 10, T0 - 100)}
    p = plan(m, pods, now=T0 + 2, loops=loops, restarts=2)
    status = statuses.compute_status(m, {}, pods, p)
    ready = statuses.condition(status["conditions"], contract.READY)
    progressing = statuses.condition(status["conditions"], contract.PROGRESSING)
    degraded = statuses.condition(status["conditions"], contract.DEGRADED)
    due = stamp(T0 + 1 + 20)
    whom = "the whole mesh" if policy == "RestartMesh" else "it"
    assert ready["reason"] == contract.CRASH_LOOP_BACK_OFF and ready["status"] == "False"
    assert ready["message"] == (
        f"1 of 2 procs ready; proc 1 (exit code 3, Error) failed 3 times in a row: the operator "
        f"restarts {whom} at {due}, after a back-off of 20 s"
        + ("; the mesh's other 1 proc is stopped until then (deleted, not counted as failed)"
           if policy == "RestartMesh" else "")
        + f" (restartPolicy {policy}, 2 of at "
        f"most 100 restarts used; the back-off doubles with each failure in a row, the failed "
        f"pod kept meanwhile)")
    assert (progressing["status"], progressing["reason"]) == ("True", contract.CRASH_LOOP_BACK_OFF)
    assert degraded["status"] == "False"
    assert status["phase"] == statuses.PHASE_WAITING
    assert status[contract.CRASH_LOOPS_STATUS_FIELD] == [
        {"rank": 1, "podUID": "uid-now", "failures": 3, "backOffSeconds": 20, "restartTime": due}]


def test_no_back_off_setting_restarts_every_failure_at_once():
    m = mesh(restartPolicy="RestartProc", maxRestarts=100)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 5, 40, T0 - 100)}
    off = settings.Settings(restart_backoff_seconds=0)
    p = planning.plan(m, restarts=0, pods={0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0)},
                      settings=off, now=T0 + 2, crash_loops=loops)
    assert not p.backoff and p.restarts == 1


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_the_restart_event_says_the_back_off_it_waited(policy):
    m = mesh(restartPolicy=policy, maxRestarts=100)
    pods = {0: pod(m, 0), 1: crashed(m, 1, "uid-now", started=T0)}
    loops = {1: crashloops.CrashLoop(1, "uid-before", 2, 10, T0 - 100)}
    p = plan(m, pods, now=T0 + 21, loops=loops, restarts=2)
    failed = [e for e in eventing.transitions({}, {}, p, [], pods, "m") if e[1] == "ProcFailed"]
    assert len(failed) == 1 and failed[0][2].endswith(
        "(restart 3) after a back-off of 20 s (failure 3 in a row)")
    # The first failure of a row, and a lost proc whose entry is of an earlier pod: as before.
    p = plan(m, pods, now=T0 + 2, restarts=2)
    assert [e[2] for e in eventing.transitions({}, {}, p, [], pods, "m") if e[1] == "ProcFailed"][0] \
        .endswith("(restart 3)")
    p = plan(m, {0: pod(m, 0)}, now=T0, loops=loops, restarts=2,
             last_phases={0: "Running", 1: "Running"})
    assert [e[2] for e in eventing.transitions({}, {}, p, [], {0: pod(m, 0)}, "m")
            if e[1] == "ProcFailed"][0].endswith("(restart 3)")


def test_a_restart_mesh_waiting_its_back_off_stops_its_healthy_procs_and_counts_once():
    """Under RestartMesh the mesh is replaced whole when its back-off ends, so its healthy
    procs stop when the wait starts (they held their devices, their SPMD peer given up): their
    pods are deleted, recorded Terminating first, so not taken for lost procs nor counted.
    The failed pod stays until the restart, which marks and deletes it as one without a wait;
    an operator that dies after that mark neither counts the restart again nor waits again."""
    m = mesh(restartPolicy="RestartMesh", maxRestarts=100)
    failed = crashed(m, 1, "uid-now", started=T0)
    loops = {1: crashloops.CrashLoop(1, "uid-before", 1, 0, 0)}  # restarted once at once
    ran = {0: "Running", 1: "Running"}
    p = plan(m, {0: pod(m, 0), 1: failed}, now=T0 + 2, loops=loops, restarts=1, last_phases=ran)
    assert p.backoff[1].failures == 2 and p.restarts == 1
    assert p.deletes == (("m-0", "pod-uid-m-0"),) and not p.marks and not p.creates
    assert not p.restarted and not p.lost_procs
    written_status = statuses.before_deletes(m, {}, {0: pod(m, 0), 1: failed}, p)
    phases = {e["rank"]: e.get("podPhase") for e in written_status["procs"]}
    assert phases == {0: "Terminating", 1: "Failed"}
    due = p.backoff[1].restart_at

    # While it waits (the peer's pod gone): nothing created, nothing counted, none lost.
    waiting = statuses.compute_status(m, written_status, {1: failed}, p)
    p = plan(m, {1: failed}, now=T0 + 3, loops=crashloops.read(written_status), restarts=1,
             last_phases={e["rank"]: e["podPhase"] for e in waiting["procs"] if "podPhase" in e})
    assert p.backoff[1].restart_at == due and not p.deletes and not p.creates
    assert p.restarts == 1 and not p.lost_procs

    # It ends: counted once, the failed pod marked, then deleted; the mesh made again after.
    p = plan(m, {1: failed}, now=due, loops=crashloops.read(written_status), restarts=1)
    assert p.restarts == 2 and p.deletes == (("m-1", "uid-now"),)
    assert p.marks == (("m-1", "uid-now", 2),) and not p.backoff and not p.creates
    marked = {**failed, "metadata": {**failed["metadata"], "annotations": {
        names.RESTART_COUNTED_ANNOTATION: "2"}}}
    p = plan(m, {1: marked}, now=due + 1, loops=written(p), restarts=2)  # its operator died
    assert p.restarts == 2 and p.deletes == (("m-1", "uid-now"),) and not p.backoff
    assert sorted(plan(m, {}, now=due + 2, loops=written(p), restarts=2).creates) == [0, 1]
