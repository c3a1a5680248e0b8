"""Killing a proc restarts it per spec.restartPolicy, counted in status.restarts; restarting the
operator in the middle of creating a mesh leaves no duplicate and no orphan; an operator killed
between counting a restart and deleting the failed pod does not count it again."""

import signal

import pytest

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def uids(core, namespace, name):
    return {p.metadata.name: p.metadata.uid for p in support.mesh_pods(core, namespace, name)}


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_killed_proc_is_restarted(operator, namespace, custom, core, policy):
    support.create_mesh(custom, namespace, "rs", perHost=[{"name": "procs", "size": 3}],
                        restartPolicy=policy, maxRestarts=2)
    mesh = support.wait_ready(custom, namespace, "rs")
    before = uids(core, namespace, "rs")
    support.kill_proc(mesh["status"]["procs"][1]["address"], support.token(core, namespace, "rs"))

    def restarted_and_ready():
        m = support.get_mesh(custom, namespace, "rs")
        ready = support.condition(m, "Ready").get("status") == "True"
        return m if ready and m["status"]["restarts"] == 1 else None

    mesh = testing.wait_for(restarted_and_ready, "restart counted and mesh Ready again")
    after = uids(core, namespace, "rs")
    assert len(after) == 3
    changed = {name for name in after if after[name] != before[name]}
    assert changed == ({"rs-1"} if policy == "RestartProc" else {"rs-0", "rs-1", "rs-2"})
    # Events are posted after the status write of the same reconcile: wait rather than race it.
    failed = testing.wait_for(
        lambda: [e for e in support.events(core, namespace, "rs") if e.reason == "ProcFailed"], "a ProcFailed event")
    assert failed[0].type == "Warning"


def test_never_policy_and_restart_limit(operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "nv", perHost=[{"name": "procs", "size": 2}],
                        restartPolicy="Never")
    mesh = support.wait_ready(custom, namespace, "nv")
    support.kill_proc(mesh["status"]["procs"][0]["address"], support.token(core, namespace, "nv"))
    mesh = support.wait_condition(custom, namespace, "nv", "Degraded", "True", "ProcFailed")
    assert mesh["status"]["restarts"] == 0 and mesh["status"]["readyProcs"] == 1
    assert mesh["status"]["procs"][0]["podPhase"] == "Failed"

    support.create_mesh(custom, namespace, "lim", perHost=[{"name": "procs", "size": 1}],
                        restartPolicy="RestartProc", maxRestarts=0)
    mesh = support.wait_ready(custom, namespace, "lim")
    support.kill_proc(mesh["status"]["procs"][0]["address"], support.token(core, namespace, "lim"))
    mesh = support.wait_condition(custom, namespace, "lim", "Degraded", "True",
                                  "RestartLimitReached")
    assert mesh["status"]["restarts"] == 0


def test_operator_restart_mid_creation_leaves_no_duplicates(operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "big", perHost=[{"name": "procs", "size": 12}])
    testing.wait_for(lambda: len(support.mesh_pods(core, namespace, "big")) >= 1,
                     "the first pods")
    operator.stop(signal.SIGKILL)  # no graceful shutdown: whatever was in flight is lost
    token = support.token(core, namespace, "big")
    operator.start()
    mesh = support.wait_ready(custom, namespace, "big")
    pods = support.mesh_pods(core, namespace, "big")
    assert sorted(p.metadata.name for p in pods) == sorted(f"big-{r}" for r in range(12))
    assert all(p.metadata.owner_references[0].uid == mesh["metadata"]["uid"] for p in pods)
    assert support.token(core, namespace, "big") == token
    secrets = [s for s in core.list_namespaced_secret(namespace).items
               if s.metadata.name.startswith("big")]
    assert len(secrets) == 1
    services = [s for s in core.list_namespaced_service(namespace).items
                if s.metadata.name.startswith("big")]
    assert len(services) == 1


@pytest.mark.parametrize("policy,peer", [("RestartProc", None), ("RestartMesh", "deleted"),
                                         ("RestartMesh", "failed"), ("RestartMesh", "lost")])
def test_an_operator_killed_between_counting_a_restart_and_its_deletes_counts_it_once(
        operator, namespace, custom, core, policy, peer):
    """The operator writes a restart's count (status.restarts) before deleting the failed pod,
    so that a crash does not lose it; the next operator found that pod still failed and counted
    it again, and at maxRestarts 1 refused the one restart allowed (RestartLimitReached). The
    kill is the operator's test-only ``--test-exit-after restart-recorded`` (``os._exit`` right
    after that status write), so the window is hit every time. Under RestartMesh a healthy
    peer's pod is then deleted, as the first of the deletes would have been, and every proc is
    still replaced: none of the earlier attempt runs on beside a fresh rank. Or the peer, its
    partner gone, fails while no operator runs: it is of the attempt already counted, so the
    next operator restarts the mesh without counting (it had counted again: RestartLimitReached).
    Or the restart is for a lost proc (rank 1's pod deleted under it: no failed pod to mark): the
    peer it deletes is marked instead, and the next operator replaces it (unmarked, it had created
    rank 1 beside the earlier attempt's rank 0, a Ready mesh of two attempts)."""
    name = "once" + policy[7:].lower() + (peer or "")[:4]
    with support.session_operator_stopped(operator):
        operator.start("--test-exit-after", "restart-recorded", namespaces=[namespace])
        support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 2}],
                            restartPolicy=policy, maxRestarts=1)
        mesh = support.wait_ready(custom, namespace, name)
        before = uids(core, namespace, name)
        if peer == "lost":
            core.delete_namespaced_pod(f"{name}-1", namespace)
        else:
            support.kill_proc(mesh["status"]["procs"][1]["address"],
                              support.token(core, namespace, name))
        proc = operator.proc
        assert proc is not None
        testing.wait_for(lambda: proc.poll() is not None, "the operator ended at restart-recorded")
        assert proc.returncode == 137
        assert support.get_mesh(custom, namespace, name)["status"]["restarts"] == 1
        left = uids(core, namespace, name)
        assert left == before or peer == "lost" and left.get(f"{name}-0") == before[f"{name}-0"]
        if peer == "deleted":
            # As if it died in the middle of the deletes: a healthy peer's went out first (the
            # failed, counted pod's goes last). The restart still replaces every proc.
            core.delete_namespaced_pod(f"{name}-0", namespace)
        elif peer == "failed":
            support.kill_proc(mesh["status"]["procs"][0]["address"],
                              support.token(core, namespace, name))
            testing.wait_for(lambda: core.read_namespaced_pod(f"{name}-0", namespace).status.phase
                             == "Failed", "the peer's pod Failed")

    def settled():
        m = support.get_mesh(custom, namespace, name)
        if support.condition(m, "Degraded").get("reason") == "RestartLimitReached":
            return m
        return m if support.condition(m, "Ready").get("status") == "True" and \
            f"{name}-1" in (after := uids(core, namespace, name)) and \
            after[f"{name}-1"] != before[f"{name}-1"] else None

    mesh = testing.wait_for(settled, "the restart made, or refused")
    assert support.condition(mesh, "Degraded").get("reason") != "RestartLimitReached", mesh["status"]
    assert mesh["status"]["restarts"] == 1
    changed = {n for n, u in uids(core, namespace, name).items() if before.get(n) != u}
    assert changed == ({f"{name}-1"} if policy == "RestartProc" else set(before))


@pytest.mark.parametrize("policy", ["RestartMesh", "Never"])
def test_a_deleted_pod_is_a_failed_proc(operator, namespace, custom, core, policy):
    """kubectl delete pod under a running proc is a failure
    like its process exiting: counted against maxRestarts, not a silent recreation of one rank
    (RestartMesh: an SPMD group cannot take back one fresh rank; Never: it stays failed)."""
    name = "lost" + policy[:2].lower()
    support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 3}],
                        restartPolicy=policy, maxRestarts=0)
    support.wait_ready(custom, namespace, name)
    before = uids(core, namespace, name)
    core.delete_namespaced_pod(f"{name}-1", namespace)
    reason = "RestartLimitReached" if policy == "RestartMesh" else "ProcFailed"
    mesh = support.wait_condition(custom, namespace, name, "Degraded", "True", reason)
    degraded = support.condition(mesh, "Degraded")
    assert f"proc 1 (its pod {name}-1 was deleted) failed" in degraded["message"]
    assert mesh["status"]["restarts"] == 0 and mesh["status"]["readyProcs"] == 2
    mesh = testing.wait_for(
        lambda: (m := support.get_mesh(custom, namespace, name))["status"]["procs"][1].get(
            "podPhase") == "Deleted" and m, "rank 1's entry says its pod was deleted")
    assert support.condition(mesh, "Ready")["status"] == "False"
    # Not recreated: the survivors are the same pods, and rank 1 has none.
    testing.wait_for(lambda: f"{name}-1" not in uids(core, namespace, name), "rank 1's pod gone")
    assert uids(core, namespace, name) == {n: u for n, u in before.items() if n != f"{name}-1"}
    failed = testing.wait_for(
        lambda: [e for e in support.events(core, namespace, name) if e.reason == reason],
        f"a {reason} event")
    assert f"its pod {name}-1 was deleted" in failed[0].message


def test_a_deleted_pod_restarts_the_whole_mesh_under_restart_mesh(operator, namespace, custom,
                                                                   core):
    support.create_mesh(custom, namespace, "lostall", perHost=[{"name": "procs", "size": 3}],
                        restartPolicy="RestartMesh", maxRestarts=1)
    support.wait_ready(custom, namespace, "lostall")
    before = uids(core, namespace, "lostall")
    core.delete_namespaced_pod("lostall-1", namespace)

    def restarted_and_ready():
        m = support.get_mesh(custom, namespace, "lostall")
        ready = support.condition(m, "Ready").get("status") == "True"
        return m if ready and m["status"]["restarts"] == 1 else None

    testing.wait_for(restarted_and_ready, "the whole mesh restarted, counted, Ready again")
    after = uids(core, namespace, "lostall")
    assert sorted(after) == sorted(before) and not set(after.values()) & set(before.values())
    failed = testing.wait_for(
        lambda: [e for e in support.events(core, namespace, "lostall")
                 if e.reason == "ProcFailed"], "a ProcFailed event")
    assert "lostall-1 (rank 1: its pod was deleted)" in failed[0].message


def test_a_proc_evicted_through_the_api_is_restarted_without_counting(operator, namespace, custom, core):
    """A drain evicts through the API (DisruptionTarget EvictionByEvictionAPI): the proc is
    restarted, and maxRestarts, which bounds a proc's own failures, is not used up by routine
    maintenance. A finalizer holds the evicted pod while terminating, so that the operator's
    decision is made on it (not on its absence: a pod gone unseen is counted, to be safe)."""
    name = "evicted"
    support.create_mesh(custom, namespace, name, perHost=[{"name": "procs", "size": 2}],
                        restartPolicy="RestartProc", maxRestarts=0)
    support.wait_ready(custom, namespace, name)
    before = uids(core, namespace, name)
    hold = "procmesh.io/test-hold"
    core.patch_namespaced_pod(f"{name}-1", namespace, {"metadata": {"finalizers": [hold]}})
    try:
        core.create_namespaced_pod_eviction(f"{name}-1", namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": f"{name}-1", "namespace": namespace}})
        failed = testing.wait_for(
            lambda: [e for e in support.events(core, namespace, name) if e.reason == "ProcFailed"],
            "a ProcFailed event")
        assert "EvictionByEvictionAPI: not counted in status.restarts" in failed[0].message, failed[0].message
    finally:
        core.patch_namespaced_pod(f"{name}-1", namespace, {"metadata": {"finalizers": None}})

    def replaced_and_ready():
        m = support.get_mesh(custom, namespace, name)
        now = uids(core, namespace, name)
        fresh = len(now) == 2 and now[f"{name}-1"] != before[f"{name}-1"]
        return m if fresh and support.condition(m, "Ready").get("status") == "True" else None

    mesh = testing.wait_for(replaced_and_ready, "rank 1 replaced and the mesh Ready again")
    assert mesh["status"]["restarts"] == 0
    assert support.condition(mesh, "Degraded").get("reason") != "RestartLimitReached"
    assert uids(core, namespace, name)[f"{name}-0"] == before[f"{name}-0"]
