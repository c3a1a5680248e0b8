"""Node loss, decided purely (losses.py and its use by planning.py and statuses.py).

Aspects: a node is lost when Ready is False or Unknown; the pod's own toleration for the matching
taint decides when its proc counts as failed; RestartProc and RestartMesh restart it with a
forced delete, counted once; a pod already terminating on a dead node is force-deleted without
counting, unless the taint eviction controller deleted it; Never keeps it failed; the mesh
reports NodeLost in Ready while it waits, and asks to be looked at again when time is up.
"""

import math

from procmesh_operator import losses, planning, statuses

from .builders import SETTINGS, mesh, pod

NOW = 1_000_000.0


def node_body(name, status, since="1970-01-12T13:46:40Z"):  # 1,000,000 s after the epoch
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Ready", "status": status, "lastTransitionTime": since}]}}


def lost(status="Unknown", ago=0.0, node="n1"):
    return {node: losses.NodeLoss(node, status, NOW - ago)}


def with_tolerations(body, seconds):
    body["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": seconds}]
    return body


def test_loss_of_reads_the_ready_condition():
    assert losses.loss_of(node_body("a", "True"), NOW) is None
    loss = losses.loss_of(node_body("a", "Unknown"), NOW)
    assert loss == losses.NodeLoss("a", "Unknown", NOW)
    assert loss.taint == "node.kubernetes.io/unreachable"
    assert losses.loss_of(node_body("a", "False"), NOW).taint == "node.kubernetes.io/not-ready"
    assert losses.loss_of({"metadata": {"name": "new"}}, NOW) is None  # not reported yet


def test_toleration_seconds_of_a_pod():
    m = mesh()
    rendered = pod(m, 0)  # the operator's short tolerations, 30 s by default
    assert losses.toleration_seconds(rendered, "node.kubernetes.io/unreachable") == 30
    forever = with_tolerations(pod(m, 0), None)
    assert losses.toleration_seconds(forever, "node.kubernetes.io/unreachable") == math.inf
    bare = pod(m, 0)
    bare["spec"].pop("tolerations")
    assert losses.toleration_seconds(bare, "node.kubernetes.io/unreachable") == 0
    assert losses.toleration_seconds(rendered, None) == 0  # node gone


def plan(m, pods, restarts=0, **kw):
    return planning.plan(m, restarts=restarts, pods=pods, settings=SETTINGS, now=NOW, **kw)


def test_within_toleration_reports_and_rechecks():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc")
    pods = {0: pod(m, 0, ready=False), 1: pod(m, 1, node="n2")}
    p = plan(m, pods, losses=lost(ago=10))
    assert not p.deletes and p.lost == {0: "n1"} and p.recheck == 20
    status = statuses.compute_status(m, None, pods, p)
    ready = statuses.condition(status["conditions"], "Ready")
    assert ready["reason"] == "NodeLost" and "node n1" in ready["message"]


def test_restart_proc_force_deletes_and_counts_once():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=3)
    pods = {0: pod(m, 0, uid="a"), 1: pod(m, 1, node="n2")}
    p = plan(m, pods, losses=lost(ago=31))
    assert p.deletes == (("m-0", "a"),) and p.force == {"m-0"} and p.restarts == 1


def test_restart_mesh_restarts_everything_and_forces_the_lost():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    pods = {0: pod(m, 0, uid="a"), 1: pod(m, 1, uid="b", node="n2")}
    p = plan(m, pods, losses=lost(ago=31))
    assert sorted(p.deletes) == [("m-0", "a"), ("m-1", "b")] and p.force == {"m-0"}
    assert p.restarts == 1 and p.restarted == ("m",) and not p.creates


def test_terminating_on_dead_node_is_forced_without_counting():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    pods = {0: pod(m, 0, uid="a", terminating=True), 1: pod(m, 1, uid="b", terminating=True,
                                                           node="n2")}
    p = plan(m, pods, restarts=1, losses=lost(ago=31))
    assert p.deletes == (("m-0", "a"),) and p.force == {"m-0"} and p.restarts == 1


def test_eviction_by_taint_manager_still_counts_as_a_failure():
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartMesh", maxRestarts=3)
    evicted = pod(m, 0, uid="a", terminating=True)
    evicted["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"})
    pods = {0: evicted, 1: pod(m, 1, uid="b", node="n2")}
    p = plan(m, pods, losses=lost(ago=31))
    assert p.restarts == 1 and sorted(p.deletes) == [("m-0", "a"), ("m-1", "b")]


def test_never_keeps_the_lost_proc_failed():
    m = mesh(per_host=(("procs", 2),), restartPolicy="Never")
    pods = {0: pod(m, 0, uid="a"), 1: pod(m, 1, node="n2")}
    p = plan(m, pods, losses=lost(ago=31))
    assert not p.deletes and p.failed == (0,) and p.restarts == 0


def test_gone_node_acts_at_once_and_own_tolerations_win():
    m = mesh(per_host=(("procs", 1),), restartPolicy="RestartProc")
    p = plan(m, {0: pod(m, 0, uid="a")}, losses=lost(losses.GONE, ago=0))
    assert p.force == {"m-0"} and p.restarts == 1
    patient = with_tolerations(pod(m, 0, uid="a"), 600)
    p = plan(m, {0: patient}, losses=lost(ago=31))
    assert not p.deletes and p.recheck == 569
