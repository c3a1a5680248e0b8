"""status.procs entries through the memo: the same as computed afresh, recomputed only for pods
whose version changed.

Aspects: a memo's entries equal the fresh ones as pods are created, bound, become ready and
are replaced; an unchanged pod version is not read again (the memo's point); a new
resourceVersion, a new uid at a rank, a claimed device and a changed spec each recompute;
compute_status with a memo writes the same status as without one.
"""

import copy

from procmesh_operator import planning, proc_entries, statuses

from .builders import mesh, pod

T0 = "2026-01-01T00:00:00Z"


def test_the_memo_gives_the_fresh_entries_as_pods_come_and_change():
    m = mesh(hosts=2, per_host=(("procs", 3),))
    memo = proc_entries.EntryMemo()
    pods: dict[int, dict] = {}
    assert memo.entries(m, pods) == proc_entries.entries(m, pods)  # no pods yet
    for rank in range(m.size):
        pods[rank] = pod(m, rank, phase="Pending", ready=False, node=None, ip=None, rv=rank + 1)
        assert memo.entries(m, pods) == proc_entries.entries(m, pods)
    for rank in range(m.size):
        pods[rank] = pod(m, rank, rv=100 + rank)  # bound, running, ready
        assert memo.entries(m, pods) == proc_entries.entries(m, pods)
    pods[4] = pod(m, 4, terminating=True, rv=200)
    del pods[5]
    assert memo.entries(m, pods) == proc_entries.entries(m, pods)
    assert [e["ready"] for e in memo.entries(m, pods)] == [True, True, True, True, False, False]


def test_an_unchanged_pod_version_is_not_read_again():
    m = mesh(hosts=1, per_host=(("procs", 2),))
    memo = proc_entries.EntryMemo()
    pods = {0: pod(m, 0, rv=7), 1: pod(m, 1, rv=7)}
    first = memo.entries(m, pods)
    edited = copy.deepcopy(pods[0])
    edited["status"]["podIP"] = "127.0.9.9"  # same uid and resourceVersion: the same pod
    again = memo.entries(m, {0: edited, 1: pods[1]})
    assert again[0] is first[0] and again[0]["address"] != "127.0.9.9:" + str(m.port)


def test_a_new_version_uid_claim_or_spec_recomputes():
    m = mesh(hosts=1, per_host=(("procs", 2),))
    memo = proc_entries.EntryMemo()
    pods = {0: pod(m, 0, rv=7), 1: pod(m, 1, rv=7)}
    memo.entries(m, pods)
    moved = pod(m, 0, rv=8, ip="127.0.9.9")
    assert memo.entries(m, {0: moved, 1: pods[1]})[0]["address"].startswith("127.0.9.9:")
    replaced = pod(m, 1, rv=7, uid="another-incarnation", ready=False)
    assert memo.entries(m, {0: moved, 1: replaced})[1]["ready"] is False
    dra = mesh(hosts=1, per_host=(("procs", 2),), gpus={"mode": "dra", "deviceClassName": "gpu.example.com"})
    assert "gpu" not in memo.entries(dra, {0: moved, 1: replaced})[0]
    assert memo.entries(dra, {0: moved, 1: replaced}, {0: "gpu-3"})[0]["gpu"] == "gpu-3"
    wider = mesh(hosts=1, per_host=(("procs", 3),))
    assert [e["rank"] for e in memo.entries(wider, {0: moved})] == [0, 1, 2]


def test_compute_status_with_a_memo_writes_the_same_status():
    m = mesh(hosts=2, per_host=(("procs", 2),))
    memo = proc_entries.EntryMemo()
    pods = {0: pod(m, 0), 1: pod(m, 1, ready=False), 2: pod(m, 2)}
    for _ in range(2):
        with_memo = statuses.compute_status(m, None, pods, planning.Plan(), now=T0, memo=memo)
        assert with_memo == statuses.compute_status(m, None, pods, planning.Plan(), now=T0)
        assert with_memo["readyProcs"] == 2
