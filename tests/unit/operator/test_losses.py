"""Node loss, decided purely (losses.py and its use by planning.py and statuses.py).

Aspects: a node is lost when Ready is False or Unknown; the pod's own toleration for the node's
taint, counted from the taint's timeAdded, decides when its proc counts as failed; a lost node
the node lifecycle controller has not tainted (it holds evictions when every node is lost) holds
its procs, reported and never counted; RestartProc and RestartMesh restart it with a
forced delete, counted once; a pod already terminating on a dead node is force-deleted without
counting, unless the taint eviction controller deleted it; Never keeps it failed; the mesh
reports NodeLost in Ready while it waits, and asks to be looked at again when time is up.
"""

import math

from procmesh_operator import losses, planning, statuses

from .builders import SETTINGS, mesh, pod

NODE_LOSS = "procmesh.io/node-loss-toleration-seconds"

NOW = 1_000_000.0


def node_body(name, status, taint=None, added="1970-01-12T13:46:40Z"):  # 1,000,000 s in
    body = {"metadata": {"name": name}, "spec": {}, "status": {"conditions": [
        {"type": "Ready", "status": status, "lastTransitionTime": "1970-01-01T00:00:00Z"}]}}
    if taint:
        body["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                  {"key": taint, "effect": "NoExecute", "timeAdded": added}]
    return body


TAINTS = {"Unknown": "node.kubernetes.io/unreachable", "False": "node.kubernetes.io/not-ready"}


def lost(status="Unknown", ago=0.0, node="n1"):
    if status == losses.GONE:
        return {node: losses.gone(node, NOW - ago)}
    return {node: losses.NodeLoss(node, status, NOW - ago, TAINTS[status])}


def held(node="n1"):
    return {node: losses.NodeLoss(node, "Unknown", None)}


def with_tolerations(body, seconds):
    """The pod as rendered from a template with its own toleration for unreachable only."""
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        own["tolerationSeconds"] = seconds
    body["spec"]["tolerations"] = [own]
    body["metadata"]["annotations"][NODE_LOSS] = "node.kubernetes.io/not-ready=30"
    return body


def test_loss_of_reads_the_ready_condition_and_the_taint():
    assert losses.loss_of(node_body("a", "True"), NOW) is None
    loss = losses.loss_of(node_body("a", "Unknown", TAINTS["Unknown"]), NOW + 5)
    assert loss == losses.NodeLoss("a", "Unknown", NOW, "node.kubernetes.io/unreachable")
    assert not loss.held
    loss = losses.loss_of(node_body("a", "False", TAINTS["False"]), NOW)
    assert loss.taint == "node.kubernetes.io/not-ready"
    untainted = losses.loss_of(node_body("a", "Unknown"), NOW)
    assert untainted == losses.NodeLoss("a", "Unknown", None) and untainted.held
    assert not losses.gone("a", NOW).held
    assert losses.loss_of({"metadata": {"name": "new"}}, NOW) is None  # not reported yet


def test_toleration_seconds_of_a_pod():
    m = mesh()
    rendered = pod(m, 0)  # the operator's tolerations: without end, counted by it, 30 s
    assert all("tolerationSeconds" not in t for t in rendered["spec"]["tolerations"])
    assert losses.toleration_seconds(rendered, "node.kubernetes.io/unreachable") == 30
    assert losses.toleration_seconds(rendered, "node.kubernetes.io/not-ready") == 30
    forever = with_tolerations(pod(m, 0), None)
    assert losses.toleration_seconds(forever, "node.kubernetes.io/unreachable") == math.inf
    assert losses.toleration_seconds(forever, "node.kubernetes.io/not-ready") == 30
    assert losses.toleration_seconds(with_tolerations(pod(m, 0), 5),
                                     "node.kubernetes.io/unreachable") == 5
    bare = pod(m, 0)
    bare["spec"].pop("tolerations")
    bare["metadata"]["annotations"].pop(NODE_LOSS)
    assert losses.toleration_seconds(bare, "node.kubernetes.io/unreachable") == 0
    assert losses.toleration_seconds(rendered, None) == 0  # node gone


def test_toleration_seconds_count_only_tolerations_of_the_taint():
    """As the taint eviction controller: a toleration of another effect, or with a value (the
    node-loss taints have none), does not keep the pod on the lost node."""
    body = pod(mesh(), 0)
    body["metadata"]["annotations"].pop(NODE_LOSS)
    unreachable = "node.kubernetes.io/unreachable"
    for own, seconds in (({"key": unreachable, "operator": "Exists", "effect": "NoSchedule",
                           "tolerationSeconds": 600}, 0),
                         ({"key": unreachable, "operator": "Equal", "value": "x", "tolerationSeconds": 600}, 0),
                         ({"key": unreachable, "operator": "Equal", "tolerationSeconds": 600}, 600),
                         ({"operator": "Exists", "tolerationSeconds": 90}, 90)):
        body["spec"]["tolerations"] = [own]
        assert losses.toleration_seconds(body, unreachable) == seconds, own


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


def test_an_untainted_lost_node_holds_its_procs():
    """Every node lost at once (the node lifecycle controller's master disruption mode, as
    when the API server was away longer than the nodes' grace): no taint, so nothing is
    counted, deleted or rechecked, however long it lasts; the status says why they wait."""
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=3)
    pods = {0: pod(m, 0, uid="a", ready=False), 1: pod(m, 1, uid="b", ready=False, node="n2")}
    every = {**held("n1"), **held("n2")}
    p = plan(m, pods, losses=every)
    assert not p.deletes and not p.force and p.restarts == 0 and p.recheck is None
    assert p.lost == {0: "n1", 1: "n2"} and p.held == ("n1", "n2")
    ready = statuses.condition(statuses.compute_status(m, None, pods, p)["conditions"], "Ready")
    assert ready["reason"] == "NodeLost" and "held on n1, n2" in ready["message"]
    # Tainted again once one node is back: the toleration starts at the new taint.
    p = plan(m, {0: pods[0]}, losses=lost(ago=10))
    assert not p.deletes and p.recheck == 20 and not p.held


def test_every_node_lost_at_once_is_an_outage_and_holds_even_a_tainted_one():
    """v1.36 can leave a taint on one node as it enters master disruption mode: the operator
    holds every node's procs while no node is Ready, and after that counts from the end."""
    every = {**lost(ago=100, node="n1"), **held("n2")}
    assert losses.outage(every, ready=0) and not losses.outage(every, ready=1)
    assert not losses.outage(lost(losses.GONE), ready=0)  # deleted nodes: no outage
    during = losses.judged(every, during_outage=True, resumed=None)
    assert during["n1"].held and during["n2"].held
    m = mesh(per_host=(("procs", 2),), restartPolicy="RestartProc", maxRestarts=3)
    pods = {0: pod(m, 0, uid="a"), 1: pod(m, 1, uid="b", node="n2")}
    p = plan(m, pods, losses=during)
    assert not p.deletes and p.restarts == 0 and p.held == ("n1", "n2")
    after = losses.judged(every, during_outage=False, resumed=NOW - 10)
    assert after["n1"].since == NOW - 10 and after["n2"].held
    p = plan(m, pods, losses=after)
    assert not p.deletes and p.recheck == 20 and p.held == ("n2",)
    gone = losses.judged(lost(losses.GONE), during_outage=True, resumed=None)
    assert plan(m, {0: pod(m, 0, uid="a")}, losses=gone).force == {"m-0"}


def test_the_first_listing_of_nodes_is_no_outage():
    """kopf lists nodes one by one (event type None): a lost node listed before the Ready one
    must not count as an outage that ended, which would restart every lost node's clock."""
    from procmesh_operator import reconciling

    ctl = reconciling.Controller(None, SETTINGS)
    ctl.node_event(None, node_body("dead", "Unknown", TAINTS["Unknown"]))
    ctl.node_event(None, node_body("live", "True"))
    assert ctl._outage_ended is None
    assert not ctl._judged_losses()["dead"].held
    # A real outage, from the watch: the live node lost too, then back.
    ctl.node_event("MODIFIED", node_body("live", "Unknown"))
    assert ctl._judged_losses()["dead"].held and ctl._judged_losses()["live"].held
    ctl.node_event("MODIFIED", node_body("live", "True"))
    assert ctl._outage_ended is not None
    assert ctl._judged_losses()["dead"].since == ctl._outage_ended


def test_a_swapped_taint_keeps_the_first_clock():
    """not-ready, then unreachable (a NotReady node that stops reporting): the clock runs from
    the first taint, as the taint eviction controller keeps a pod's first scheduled eviction."""
    first = losses.loss_of(node_body("a", "False", TAINTS["False"]), NOW)
    swapped = losses.loss_of(node_body("a", "Unknown", TAINTS["Unknown"],
                                       added="1970-01-12T13:47:00Z"), NOW)
    kept = losses.carried(first, swapped)
    assert kept.taint == TAINTS["Unknown"] and kept.since == first.since == NOW
    assert losses.carried(None, swapped) == swapped
    assert losses.carried(first, None) is None  # Ready again: the next loss starts anew
    assert losses.carried(first, losses.gone("a", NOW + 50)).since == NOW + 50
    held_now = losses.loss_of(node_body("a", "Unknown"), NOW)
    assert losses.carried(first, held_now).held  # untainted (evictions held): held


def test_deleted_nodes_without_our_pods_are_dropped_and_nothing_else():
    lost_nodes = {"gone-used": losses.gone("gone-used", NOW), "gone-free": losses.gone("gone-free", NOW),
                  "down": losses.loss_of(node_body("down", "Unknown", TAINTS["Unknown"]), NOW)}
    kept = losses.without_empty_gone(lost_nodes, in_use={"gone-used", "elsewhere"})
    assert kept == {"gone-used": lost_nodes["gone-used"], "down": lost_nodes["down"]}


def test_a_node_ready_and_uncordoned_wakes_the_meshes_waiting_for_room():
    """A mesh waiting for a node (WaitingForNode, WaitingForGPUBudget) is looked at again when
    a node joins, comes back Ready, or is uncordoned, not only at the next resync."""
    from procmesh_operator import reconciling

    class Recording(reconciling.Controller):
        def __init__(self):
            super().__init__(None, SETTINGS)
            self.woken = []

        def enqueue(self, key, delay=0.0):
            self.woken.append(key)

    ctl = Recording()
    ctl._waiting_for_room.add(("ns", "waiting"))
    cordoned = node_body("n1", "True")
    cordoned["spec"]["unschedulable"] = True
    ctl.node_event("ADDED", cordoned)
    assert ctl.woken == []  # Ready but cordoned: nothing placeable came
    ctl.node_event("MODIFIED", node_body("n1", "True"))  # uncordoned
    assert ctl.woken == [("ns", "waiting")]
    ctl.node_event("MODIFIED", node_body("n1", "True"))  # a heartbeat: no change
    assert ctl.woken == [("ns", "waiting")]
    ctl.node_event("MODIFIED", node_body("n1", "False", TAINTS["False"]))
    ctl.node_event("MODIFIED", node_body("n1", "True"))  # back
    assert ctl.woken.count(("ns", "waiting")) == 2
