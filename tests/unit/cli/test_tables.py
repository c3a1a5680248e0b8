"""What the CLI prints, from API objects alone: ages as kubectl writes them, get rows (a stale
status is never shown as the operator's phase), describe's proc table, top rows, log lines."""

import datetime
import io

import pytest

from mesh_client._src.cli import logs, tables
from mesh_client._src.kubernetes import logstreams

NOW = datetime.datetime(2026, 1, 2, 12, 0, 0, tzinfo=datetime.timezone.utc)


def ago(seconds):
    return (NOW - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_ages_as_kubectl_writes_them():
    cases = {5: "5s", 119: "119s", 125: "2m5s", 600: "10m", 3 * 3600 + 60: "3h1m", 30 * 3600: "30h",
             3 * 86400 + 3600: "3d1h", 30 * 86400: "30d", 800 * 86400: "2y"}
    assert {s: tables.age(ago(s), NOW) for s in cases} == cases
    assert tables.age(None, NOW) == "<none>"


def mesh(generation=1, observed=1, phase="Ready", ready=2, procs=None):
    return {"metadata": {"name": "m", "namespace": "ns", "generation": generation,
                         "creationTimestamp": ago(300)},
            "spec": {"hosts": 1, "perHost": [{"name": "gpus", "size": 2}],
                     "gpus": {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.25}},
            "status": {"observedGeneration": observed, "phase": phase, "readyProcs": ready,
                       "desiredProcs": 2, "restarts": 1,
                       "conditions": [{"type": "GPUBudgetSatisfied", "status": "True"}],
                       "procs": procs or []}}


def test_get_row_and_wide():
    assert tables.get_row(mesh(), NOW) == ["m", "2/2", "Ready", "1", "pinned", "5m"]
    assert tables.get_row(mesh(), NOW, wide=True, namespace=True) == [
        "ns", "m", "2/2", "Ready", "1", "pinned", "5m", "hosts=1 x gpus=2", "True", "<none>", "1/1"]


def test_get_never_shows_an_old_status_as_current():
    assert tables.get_row(mesh(generation=3, observed=2), NOW)[2] == "StatusStale"
    bare = {"metadata": {"name": "m", "generation": 1}, "spec": {}}
    assert tables.get_row(bare, NOW)[1:3] == ["0/1", "NotReconciled"]  # hosts defaults to 1
    unseen = {"metadata": {"name": "m", "generation": 1},
              "spec": {"hosts": 2, "perHost": [{"name": "gpus", "size": 4}]}}
    assert tables.get_row(unseen, NOW)[1:3] == ["0/8", "NotReconciled"]  # from the spec
    assert tables.get_row({"metadata": {"name": "m"}, "spec": {"hosts": "x"}}, NOW)[1] == "0/?"


def test_a_mesh_being_deleted_is_terminating_not_stale():
    deleting = mesh(generation=2, observed=1)
    deleting["metadata"] |= {"deletionTimestamp": ago(30), "finalizers": ["foregroundDeletion"]}
    assert tables.get_row(deleting, NOW)[2] == "Terminating"
    text = tables.describe_text(deleting, None, [], NOW)
    assert f"Terminating:    since {ago(30)} (30s ago); finalizers left: foregroundDeletion" in text
    assert "once the mesh's pods are gone (foreground deletion)" in text and "StatusStale" not in text


def test_describe_table_and_last_failure():
    procs = [{"rank": 0, "coords": {"hosts": 0, "gpus": 0}, "pod": "m-0", "node": "n1", "ready": True,
              "gpu": "GPU-0"},
             {"rank": 1, "coords": {"hosts": 0, "gpus": 1}, "pod": "m-1", "ready": False}]
    pods = [
        {"metadata": {"name": "m-0", "annotations": {"procmesh.io/memory-fraction": "0.25"}},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"restartCount": 1, "state": {"running": {}}, "lastState": {
                        "terminated": {"exitCode": 137, "signal": 9, "reason": "Error",
                                       "finishedAt": ago(60)}}}]}},
        {"metadata": {"name": "m-1"}, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/2 nodes are available"}]}},
    ]
    rows = tables.proc_rows(mesh(procs=procs), pods, NOW)
    assert rows[0] == ["0", "hosts=0,gpus=0", "m-0", "n1", "GPU-0", "25% of GPU", "true", "Running", "1",
                       "exit 137, signal 9, Error (60s ago)"]
    assert rows[1][6:] == ["false", "Pending (Unschedulable)", "0", "pod m-1 is Pending: 0/2 nodes are available"]
    unreadable = tables.proc_rows(mesh(procs=procs), None, NOW)  # pods not readable: the status's READY
    assert [r[6:9] for r in unreadable] == [["true", "-", "-"], ["false", "-", "-"]]
    text = tables.describe_text(mesh(procs=procs), pods, [], NOW)
    assert "Warning:        StatusBehindPods" not in text  # m-0 ready as its status says
    assert "Shape:          hosts=1 x gpus=2 (2 procs)" in text


def test_top_rows():
    proc = {"rank": 0, "pod": "m-0", "gpu": "GPU-a"}
    gib = 2**30
    row = tables.top_row(proc, {"gpu": "GPU-a", "actors": 2, "memory": {
        "allocated": gib, "reserved": 2 * gib, "total": 80 * gib, "cap": 20 * gib}}, None)
    assert row == ["0", "m-0", "GPU-a", "1024Mi", "2048Mi", "20480Mi", "10%", "2"]
    assert tables.top_row(proc, {"gpu": None, "memory": None, "actors": 0}, None)[6] == "no CUDA in use"
    assert tables.top_row({"rank": 0, "pod": "m-0"}, {"gpu": "void", "memory": None, "actors": 0}, None)[2] == "-"
    assert tables.top_row(proc, None, "ConnectionRefusedError")[7] == "unreachable: ConnectionRefusedError"


def test_log_lines_whole_across_chunks_and_interleaved_with_prefix():
    assert list(logstreams.lines_of([b"a\nb", b"c\n", b"\xffd"])) == ["a", "bc", "\ufffdd"]
    out = io.StringIO()
    sink = logstreams.Interleaver(out)
    sink.write("[rank 3] ", "hello")
    assert out.getvalue() == "[rank 3] hello\n"


def test_log_selection_by_rank_and_coords():
    procs = [{"rank": r, "coords": {"hosts": r // 2, "gpus": r % 2}, "pod": f"m-{r}"} for r in range(4)]
    assert [p["rank"] for p in logs.select(procs, None, None)] == [0, 1, 2, 3]
    assert [p["rank"] for p in logs.select(procs, [2, 0], None)] == [0, 2]
    assert [p["rank"] for p in logs.select(procs, None, logs.parse_coords("hosts=1"))] == [2, 3]
    assert [p["rank"] for p in logs.select(procs, None, {"hosts": 1, "gpus": 0})] == [2]
    with pytest.raises(ValueError, match="DIM=INDEX"):
        logs.parse_coords("hosts")


def test_last_failure_of_an_evicted_pod_gives_the_kubelets_reason():
    pod = {"metadata": {"name": "m-1"}, "status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory. ",
        "containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "Error",
                                                        "finishedAt": ago(60)}}}]}}
    assert tables.last_failure(pod, NOW) == \
        "exit 137, Error (60s ago); pod Evicted: The node was low on resource: memory."


def test_describe_counts_the_procs_of_a_mesh_no_operator_has_seen():
    unseen = mesh()
    del unseen["status"]
    assert "\nReady:          0/2\n" in tables.describe_text(unseen, None, [], NOW)


BACK_OFF_PROCS = [{"rank": 0, "coords": {"hosts": 0, "gpus": 0}, "pod": "m-0", "ready": False},
                  {"rank": 1, "coords": {"hosts": 0, "gpus": 1}, "pod": "m-1", "ready": False}]
FAILED_POD = {"metadata": {"name": "m-1"}, "status": {"phase": "Failed", "containerStatuses": [
    {"restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(20)}}}]}}


def backing_off(policy):
    """A mesh whose proc 1 failed and waits out its back-off, proc 0's pod gone; ``policy`` None:
    no restartPolicy written (the default, RestartProc)."""
    waiting = mesh(procs=BACK_OFF_PROCS)
    if policy is not None:
        waiting["spec"]["restartPolicy"] = policy
    waiting["status"]["conditions"].append({"type": "Ready", "status": "False", "reason": "CrashLoopBackOff",
                                            "message": "proc 1 (exit code 1, Error) failed 2 times in a row: ..."})
    return waiting


def test_a_proc_stopped_for_its_restart_mesh_back_off_is_stopped_not_missing():
    rows = tables.proc_rows(backing_off("RestartMesh"), [FAILED_POD], NOW)
    assert rows[0][6:9] == ["false", "Stopped (CrashLoopBackOff)", "0"]
    assert rows[1][6:8] == ["false", "Failed"]  # the failed proc's pod kept, as it ended
    assert tables.proc_rows(mesh(procs=BACK_OFF_PROCS), [FAILED_POD], NOW)[0][7] == "Missing"  # no back-off


@pytest.mark.parametrize("policy", ["RestartProc", None])
def test_a_pod_gone_during_a_restart_proc_back_off_is_missing(policy):
    # Under RestartProc the operator stops no other proc for a back-off: a pod gone then is lost.
    rows = tables.proc_rows(backing_off(policy), [FAILED_POD], NOW)
    assert rows[0][7] == "Missing"
    assert rows[1][6:8] == ["false", "Failed"]
