"""Placement: colocation checks, pinned first-fit over nodes, device existence, budgets.

Aspects: scheduler's choice for none/plugin; colocateWith waits for, then follows, the partner;
colocation refusals (missing, shape, mode, devices); pinned hosts on distinct nodes; existing
pods fix a host's node; budget across meshes; missing devices; node filters; node taints
against the pods' tolerations (the template's, a Kueue flavor's, the operator's).
"""

import dataclasses

from mesh_client._src import contract
from procmesh_operator import placing, rendering, workloads

from .builders import SETTINGS, mesh, node, pod

PINNED = {"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4}


def place(m, ranks, **kw):
    kw.setdefault("own_pods", {})
    kw.setdefault("partner", None)
    kw.setdefault("partner_pods", {})
    kw.setdefault("nodes", {})
    kw.setdefault("other_pods", [])
    return placing.place(m, ranks, settings=SETTINGS, **kw)


def test_cpu_and_plugin_meshes_leave_nodes_to_the_scheduler():
    for gpus in ({}, {"mode": "plugin"}):
        result = place(mesh(gpus=gpus), [0, 1])
        assert result.refusal is None
        assert result.procs == {0: rendering.ProcPlacement(), 1: rendering.ProcPlacement()}


def test_colocated_waits_for_partner_then_follows_it():
    policy = mesh("policy", gpus=PINNED)
    trainer = mesh("trainer", gpus={"mode": "pinned", "memoryFraction": 0.5},
                   colocateWith="policy")
    nodes = {"n1": node("n1"), "n2": node("n2")}
    waiting = place(trainer, [0, 1], partner=policy, nodes=nodes,
                    partner_pods={0: pod(policy, 0, node=None)})
    assert waiting.waiting is not None and "policy-0" in waiting.waiting and not waiting.procs
    partner_pods = {0: pod(policy, 0, node="n2", placement=rendering.ProcPlacement("n2", "0")),
                    1: pod(policy, 1, node="n2", placement=rendering.ProcPlacement("n2", "1"))}
    result = place(trainer, [0, 1], partner=policy, partner_pods=partner_pods, nodes=nodes,
                   other_pods=list(partner_pods.values()))
    assert result.refusal is None, result.refusal
    assert result.procs == {0: rendering.ProcPlacement("n2", "0"),
                            1: rendering.ProcPlacement("n2", "1")}


def test_colocated_cpu_mesh_follows_partner_node():
    a, b = mesh("a"), mesh("b", colocateWith="a")
    result = place(b, [1], partner=a, partner_pods={1: pod(a, 1, node="n7")})
    assert result.procs == {1: rendering.ProcPlacement(node="n7")}


def test_colocation_refusals():
    trainer = mesh("trainer", colocateWith="policy")
    assert place(trainer, [0]).refusal.reason == contract.WAITING_FOR_COLOCATED
    assert "does not exist" in place(trainer, [0]).refusal.message
    other_shape = mesh("policy", per_host=(("gpus", 4),))
    refusal = place(trainer, [0], partner=other_shape).refusal
    assert refusal.reason == contract.INVALID_COLOCATION and "same hosts and perHost" in \
        refusal.message
    pinned_partner = mesh("policy", gpus=PINNED)
    assert "pinned mode" in place(trainer, [0], partner=pinned_partner).refusal.message
    other_devices = mesh("trainer", colocateWith="policy",
                         gpus={"mode": "pinned", "deviceIDs": [1, 0]})
    assert "differ" in place(other_devices, [0], partner=pinned_partner).refusal.message


def test_colocated_budget_refused_with_both_procs_named():
    policy = mesh("policy", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.6})
    trainer = mesh("trainer", gpus={"mode": "pinned", "memoryFraction": 0.5},
                   colocateWith="policy")
    partner_pods = {r: pod(policy, r, node="n1",
                           placement=rendering.ProcPlacement("n1", str(r))) for r in (0, 1)}
    result = place(trainer, [0, 1], partner=policy, partner_pods=partner_pods,
                   nodes={"n1": node("n1")}, other_pods=list(partner_pods.values()))
    assert result.refusal.reason == contract.BUDGET_EXCEEDED
    assert "policy-0=0.6" in result.refusal.message and "trainer-0=0.5" in result.refusal.message
    assert not result.procs


def test_a_colocated_mesh_whose_pods_may_not_go_to_its_partners_node_is_told_why():
    """The partner's pods tolerate the node's taint and match its terms; this mesh's template
    must too, or its pods would sit Unschedulable beside them."""
    policy = mesh("policy", gpus=PINNED)
    partner_pods = {r: pod(policy, r, node="n1", placement=rendering.ProcPlacement("n1", str(r)))
                    for r in (0, 1)}
    tainted = node("n1", labels={"pool": "a"}, taints=(TAINT,))

    def placed(trainer):
        return place(trainer, [0, 1], partner=policy, partner_pods=partner_pods,
                     nodes={"n1": tainted}, other_pods=list(partner_pods.values()))

    refusal = placed(mesh("trainer", gpus=PINNED, colocateWith="policy")).refusal
    assert refusal.reason == contract.WAITING_FOR_NODE and refusal.waits
    assert ("must run on node n1, beside ProcMesh 'policy''s, whose taint dedicated this mesh's "
            "pods do not tolerate: add the partner's toleration") in refusal.message
    elsewhere = placed(mesh("trainer", gpus=PINNED, colocateWith="policy", template={
        "tolerations": [TOLERATION], "nodeSelector": {"pool": "b"}})).refusal
    assert elsewhere.reason == contract.NO_NODE_FITS and not elsewhere.waits
    assert "nodeSelector or required node affinity rules out" in elsewhere.message
    result = placed(mesh("trainer", gpus=PINNED, colocateWith="policy", template={
        "tolerations": [TOLERATION], "nodeSelector": {"pool": "a"}}))
    assert result.refusal is None and {p.node for p in result.procs.values()} == {"n1"}


def test_pinned_hosts_get_distinct_nodes_first_fit():
    m = mesh(hosts=2, gpus=PINNED)
    nodes = {n: node(n) for n in ("n3", "n1", "n2")}
    result = place(m, [0, 1, 2, 3], nodes=nodes)
    assert [result.procs[r] for r in range(4)] == [
        rendering.ProcPlacement("n1", "0"), rendering.ProcPlacement("n1", "1"),
        rendering.ProcPlacement("n2", "0"), rendering.ProcPlacement("n2", "1")]
    # One node for two hosts: refused, naming the node another host takes (it said "the
    # cluster has no nodes").
    refusal = place(m, [0, 1, 2, 3], nodes={"n1": node("n1")}).refusal
    assert refusal is not None and refusal.reason == contract.NO_NODE_FITS
    assert refusal.message.endswith("host 1 of this pinned mesh (devices 0, 1): n1: runs host 0 "
                                    "of this mesh (spec.placement.hosts DistinctNodes)")


def test_existing_pod_fixes_its_hosts_node():
    m = mesh(gpus=PINNED)
    own = {0: pod(m, 0, node="n2", placement=rendering.ProcPlacement("n2", "0"))}
    result = place(m, [1], own_pods=own, nodes={"n1": node("n1"), "n2": node("n2")})
    assert result.procs == {1: rendering.ProcPlacement("n2", "1")}


def test_budget_counts_other_meshes_and_skips_full_nodes():
    other = mesh("other", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.7})
    others = [pod(other, r, node="n1", placement=rendering.ProcPlacement("n1", str(r)))
              for r in (0, 1)]
    m = mesh(gpus=PINNED)
    result = place(m, [0, 1], nodes={"n1": node("n1"), "n2": node("n2")}, other_pods=others)
    assert {p.node for p in result.procs.values()} == {"n2"}
    refused = place(m, [0, 1], nodes={"n1": node("n1")}, other_pods=others)
    assert refused.refusal.reason == contract.WAITING_FOR_GPU_BUDGET  # other's procs may end
    assert "other-0=0.7" in refused.refusal.message and refused.refusal.waits


def test_failed_pods_hold_no_budget_terminating_ones_until_they_are_gone():
    """A terminating pod's proc runs through its grace period, its GPU memory held until it
    exits: its room frees when the pod is deleted, not when it starts terminating."""
    other = mesh("other", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.7})
    others = [pod(other, 0, node="n1", phase="Failed",
                  placement=rendering.ProcPlacement("n1", "0")),
              pod(other, 1, node="n1", terminating=True,
                  placement=rendering.ProcPlacement("n1", "1"))]
    result = place(mesh(gpus=PINNED), [0, 1], nodes={"n1": node("n1")}, other_pods=others)
    assert result.refusal is not None and result.refusal.reason == contract.WAITING_FOR_GPU_BUDGET
    assert "other-1=0.7" in result.refusal.message and "other-0" not in result.refusal.message
    assert place(mesh(gpus=PINNED), [0, 1], nodes={"n1": node("n1")},
                 other_pods=others[:1]).refusal is None  # once it is gone
    # The mesh's own terminating pod is not counted beside its replacement.
    m = mesh(gpus=PINNED)
    own = {1: pod(m, 1, node="n1", terminating=True, placement=rendering.ProcPlacement("n1", "1"))}
    assert place(m, [0, 1], own_pods=own, nodes={"n1": node("n1")}).refusal is None


def test_missing_devices_and_node_filters():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 3]}, template={"nodeSelector": {"a": "b"}})
    nodes = {"n1": node("n1", gpus=2, labels={"a": "b"}), "n2": node("n2", gpus=8),
             "n3": node("n3", gpus=4, ready=False, labels={"a": "b"}),
             "n4": node("n4", gpus=0, labels={"a": "b"})}
    refusal = place(m, [0, 1], nodes=nodes).refusal
    assert refusal.reason == contract.WAITING_FOR_NODE  # n3 may become Ready
    for fragment in ("GPU 3 does not exist on node n1", "n2: does not match",
                     "n3: not Ready", "n4: has no GPUs"):
        assert fragment in refusal.message
    # No ready node can ever take it, and none may come: refused, not waited for (a pinned
    # mesh refused creates no pods, so no autoscaler adds a node for it).
    refusal = place(m, [0, 1], nodes={k: v for k, v in nodes.items() if k != "n3"}).refusal
    assert refusal.reason == contract.NO_NODE_FITS and not refusal.waits
    assert place(m, [0, 1], nodes={}).refusal.reason == contract.WAITING_FOR_NODE  # no nodes yet
    # Nor is a node that could not take it once back (it waited for it): no GPU 3, no GPUs,
    # another nodeSelector.
    for never in (node("n3", ready=False, labels={"a": "b"}), node("n3", gpus=0, ready=False),
                  node("n3", gpus=4, ready=False)):
        refusal = place(m, [0, 1], nodes={"n1": nodes["n1"], "n3": never}).refusal
        assert refusal.reason == contract.NO_NODE_FITS, never
        assert "n3: not Ready" not in refusal.message  # what keeps it out for good instead
    nodes["n5"] = node("n5", gpus=4, labels={"a": "b"})
    assert {p.node for p in place(m, [0, 1], nodes=nodes).procs.values()} == {"n5"}


def required_affinity(*terms):
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def test_the_templates_required_node_affinity_chooses_among_nodes():
    """Its required node affinity is judged as the scheduler does: a node it rules out would
    leave the pods Unschedulable (their affinity is that term and the chosen node's name)."""
    nodes = {"a": node("a", labels={"zone": "x"}), "b": node("b", labels={"zone": "y"})}
    by_label = mesh(gpus=PINNED, template=required_affinity(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["y"]}]}))
    assert {p.node for p in place(by_label, [0, 1], nodes=nodes).procs.values()} == {"b"}
    by_name = mesh(gpus=PINNED, template=required_affinity(
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}))
    assert {p.node for p in place(by_name, [0, 1], nodes=nodes).procs.values()} == {"b"}
    either = mesh(gpus=PINNED, template=required_affinity(  # terms are ORed
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}))
    assert {p.node for p in place(either, [0, 1], nodes=nodes).procs.values()} == {"a"}
    nowhere = mesh(gpus=PINNED, template=required_affinity(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}))
    refusal = place(nowhere, [0, 1], nodes=nodes).refusal
    assert refusal is not None and refusal.reason == contract.NO_NODE_FITS
    assert "a: does not match template.nodeSelector or its required node affinity" in refusal.message


TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}


def test_a_node_whose_taint_the_pods_do_not_tolerate_is_skipped():
    nodes = {"a-tainted": node("a-tainted", taints=(TAINT,)), "b-plain": node("b-plain")}
    result = place(mesh(gpus=PINNED), [0, 1], nodes=nodes)
    assert {p.node for p in result.procs.values()} == {"b-plain"}
    # PreferNoSchedule only steers the scheduler: that node is still first.
    soft = node("a-tainted", taints=({**TAINT, "effect": "PreferNoSchedule"},))
    result = place(mesh(gpus=PINNED), [0, 1], nodes={**nodes, "a-tainted": soft})
    assert {p.node for p in result.procs.values()} == {"a-tainted"}


def test_only_a_tainted_node_is_waited_for_naming_the_taint():
    refusal = place(mesh(gpus=PINNED), [0, 1],
                    nodes={"n1": node("n1", taints=(TAINT,))}).refusal
    assert refusal is not None and refusal.reason == contract.WAITING_FOR_NODE and refusal.waits
    assert refusal.message.endswith("(devices 0, 1) now: n1: untolerated taint dedicated")
    # A NoExecute taint keeps new pods off as well.
    no_execute = node("n1", taints=({**TAINT, "effect": "NoExecute"},))
    assert place(mesh(gpus=PINNED), [0, 1], nodes={"n1": no_execute}).refusal.reason == \
        contract.WAITING_FOR_NODE
    # A tainted node that could never take the host is no reason to wait (no GPU 3 there).
    far = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 3]})
    refusal = place(far, [0, 1], nodes={"n1": node("n1", taints=(TAINT,))}).refusal
    assert refusal.reason == contract.NO_NODE_FITS and "untolerated" not in refusal.message


def test_the_pods_tolerations_open_a_tainted_node():
    nodes = {"a-tainted": node("a-tainted", taints=(TAINT,)), "b-plain": node("b-plain")}
    for tolerations in ([TOLERATION], [{"operator": "Exists"}],
                        [{**TOLERATION, "operator": "Equal", "value": "ml"}]):
        m = mesh(gpus=PINNED, template={"tolerations": tolerations})
        assert {p.node for p in place(m, [0, 1], nodes=nodes).procs.values()} == {"a-tainted"}
    wrong_value = mesh(gpus=PINNED, template={"tolerations": [
        {**TOLERATION, "operator": "Equal", "value": "web"}]})
    assert {p.node for p in place(wrong_value, [0, 1], nodes=nodes).procs.values()} == {"b-plain"}
    # The operator's own node-loss tolerations count: they are on every pod it renders.
    lost = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    result = place(mesh(gpus=PINNED), [0, 1], nodes={"n1": node("n1", taints=(lost,))})
    assert {p.node for p in result.procs.values()} == {"n1"}


def test_a_cordoned_or_not_ready_node_is_waited_for_and_a_tolerated_cordon_is_not():
    for unfit, said in ((node("n1", cordoned=True), "unschedulable (cordoned)"),
                        (node("n1", ready=False), "not Ready")):
        refusal = place(mesh(gpus=PINNED), [0, 1], nodes={"n1": unfit}).refusal
        assert refusal.reason == contract.WAITING_FOR_NODE
        assert refusal.message.endswith(f"(devices 0, 1) now: n1: {said}")
    # The scheduler lets a pod that tolerates node.kubernetes.io/unschedulable onto a cordoned
    # node (as a DaemonSet's): so does placement.
    for toleration in ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                       {"operator": "Exists"}):
        m = mesh(gpus=PINNED, template={"tolerations": [toleration]})
        result = place(m, [0, 1], nodes={"n1": node("n1", cordoned=True)})
        assert {p.node for p in result.procs.values()} == {"n1"}


def test_a_hosts_new_procs_wait_for_its_node_to_take_them_again():
    """Rank 0 runs on n2; rank 1 is to be restarted. It goes nowhere but n2 (its host's
    node): while n2 cannot take it, it waits, saying why, rather than sit Pending there."""
    m = mesh(gpus=PINNED)
    own = {0: pod(m, 0, node="n2", placement=rendering.ProcPlacement("n2", "0"))}
    for unfit, said in ((node("n2", cordoned=True), "unschedulable (cordoned)"),
                        (node("n2", ready=False), "not Ready"),
                        (node("n2", taints=(TAINT,)), "untolerated taint dedicated"),
                        (node("n2", taints=({**TAINT, "effect": "NoExecute"},)),
                         "untolerated taint dedicated")):
        result = place(m, [1], own_pods=own, nodes={"n1": node("n1"), "n2": unfit})
        assert result.procs == {} and result.refusal.reason == contract.WAITING_FOR_NODE
        assert result.refusal.waits
        assert result.refusal.message.startswith(
            f"host 0's new procs wait for its node n2, where its other procs run: {said} ")
    # Fit again (or the pods tolerate what keeps others off): it goes there.
    tolerant = mesh(gpus=PINNED, template={"tolerations": [TOLERATION]})
    for m_, n2 in ((m, node("n2")), (tolerant, node("n2", taints=(TAINT,)))):
        result = place(m_, [1], own_pods=own, nodes={"n1": node("n1"), "n2": n2})
        assert result.procs == {1: rendering.ProcPlacement("n2", "1")}
    # A device the node could never give is no reason to wait: the refusal stands.
    far = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 3]})
    refusal = place(far, [1], own_pods={0: pod(far, 0, node="n2")},
                    nodes={"n2": node("n2", cordoned=True)}).refusal
    assert refusal.reason == contract.DEVICE_NOT_FOUND


def test_a_colocated_mesh_waits_while_its_partners_node_is_cordoned_or_not_ready():
    policy = mesh("policy", gpus=PINNED)
    partner_pods = {r: pod(policy, r, node="n1", placement=rendering.ProcPlacement("n1", str(r)))
                    for r in (0, 1)}
    trainer = mesh("trainer", gpus=PINNED, colocateWith="policy")
    for unfit, said in ((node("n1", cordoned=True), "unschedulable (cordoned)"),
                        (node("n1", ready=False), "not Ready")):
        refusal = place(trainer, [0, 1], partner=policy, partner_pods=partner_pods,
                        nodes={"n1": unfit}, other_pods=list(partner_pods.values())).refusal
        assert refusal.reason == contract.WAITING_FOR_NODE
        assert refusal.message == ("the colocated procs must run on node n1, beside ProcMesh "
                                   f"'policy''s, which is {said} now: they wait for it")


def test_a_kueue_flavors_toleration_opens_its_tainted_node():
    """A queued mesh is planned with its template as admitted (reconciling's _admit):
    the flavor's node labels and tolerations added, as they are to its pods."""
    flavor = {"spec": {"nodeLabels": {"pool": "gpu"}, "tolerations": [TOLERATION]}}
    nodes = {"a-plain": node("a-plain"),
             "b-pool": node("b-pool", labels={"pool": "gpu"}, taints=(TAINT,))}
    m = mesh(gpus=PINNED)
    queued = dataclasses.replace(m, template=workloads.with_flavors(m.template, [flavor]))
    assert {p.node for p in place(queued, [0, 1], nodes=nodes).procs.values()} == {"b-pool"}
    without = dataclasses.replace(m, template=workloads.with_flavors(
        m.template, [{"spec": {"nodeLabels": {"pool": "gpu"}}}]))
    refusal = place(without, [0, 1], nodes=nodes).refusal
    assert refusal.reason == contract.WAITING_FOR_NODE
    assert "b-pool: untolerated taint dedicated" in refusal.message


def test_node_info_reads_gfd_labels_then_capacity():
    info = placing.node_info({"metadata": {"name": "n1", "labels": {
        "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "143771"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert (info.gpu_count, info.gpu_memory_mib, info.ready, info.unschedulable) == \
        (2, 143771, True, False)
    info = placing.node_info({"metadata": {"name": "n2"}, "spec": {"unschedulable": True},
                              "status": {"capacity": {"nvidia.com/gpu": "4"}}})
    assert (info.gpu_count, info.gpu_memory_mib, info.ready, info.unschedulable) == \
        (4, None, False, True)
    assert info.taints == ()
    info = placing.node_info({"metadata": {"name": "n3"}, "spec": {"taints": [TAINT]}})
    assert info.taints == (TAINT,)


def test_device_uses_reads_annotations():
    m = mesh(gpus=PINNED)
    p = pod(m, 1, node=None, placement=rendering.ProcPlacement("n4", "1"))
    uses = placing.device_uses([p])
    assert uses == {("n4", "1"): [placing.budgets.DeviceUse(contract.pod_name("m", 1), 0.4)]}


def test_a_colocation_cycle_is_refused_naming_it_not_waited_for():
    """Each of two meshes colocated with the other waits for the other's procs to be
    scheduled: they never are, so it is refused, with the fix the API server allows."""
    a, b = mesh("a", colocateWith="b"), mesh("b", colocateWith="a")
    refusal = place(a, [0, 1], partner=b).refusal
    assert refusal is not None and refusal.reason == contract.INVALID_COLOCATION
    assert "a -> b -> a" in refusal.message and not refusal.waits
    assert "delete one of them and create it again without colocateWith" in refusal.message
    assert "a -> a" in place(mesh("a", colocateWith="a"), [0], partner=mesh("a", colocateWith="a")
                             ).refusal.message
    chain = place(a, [0], partner=mesh("b", colocateWith="c"),
                  partner_pods={0: pod(mesh("b"), 0, node=None)})
    assert chain.refusal is None and chain.waiting is not None  # a chain is placed in turn


def test_a_longer_colocation_cycle_is_refused_from_every_mesh_on_it_or_led_into_it():
    """a -> b -> c -> a: each waits for the next one's procs, none is ever placed. The
    reconciler follows colocateWith past the partner (``colocation_chain``); a mesh that leads
    into a cycle (x -> a) is refused too, naming the cycle it can never be placed behind."""
    a, b = mesh("a", colocateWith="b"), mesh("b", colocateWith="c")
    refusal = place(a, [0], partner=b, colocation_chain=["c", "a"]).refusal
    assert refusal is not None and refusal.reason == contract.INVALID_COLOCATION
    assert "a -> b -> c -> a" in refusal.message and not refusal.waits
    led = place(mesh("x", colocateWith="a"), [0], partner=a,
                colocation_chain=["b", "c", "a"]).refusal
    assert led is not None and led.reason == contract.INVALID_COLOCATION
    assert "a -> b -> c -> a" in led.message and "neither can this mesh" in led.message
    # A path that ends (c does not exist, or has no colocateWith) is a chain, placed in turn.
    ends = place(a, [0], partner=b, colocation_chain=["c"],
                 partner_pods={0: pod(mesh("b"), 0, node=None)})
    assert ends.refusal is None and ends.waiting is not None
    assert placing.colocation_cycle("a", "b", ["c", "d"]) is None
    assert placing.colocation_cycle("a", "b", ["c", "b"]) == ["b", "c", "b"]


def test_only_refusals_that_clear_by_themselves_wait():
    trainer = mesh("trainer", colocateWith="policy")
    assert place(trainer, [0]).refusal.waits  # the partner may yet be created
    assert not place(trainer, [0], partner=mesh("policy", per_host=(("gpus", 4),))).refusal.waits
    assert not place(trainer, [0], partner=mesh("policy", gpus=PINNED)).refusal.waits
    # Over budget, it waits for procs of other meshes to leave room (WaitingForGPUBudget); not
    # for its partner's, which stay as long as it does (GPUBudgetExceeded, fixed by recreating).
    policy = mesh("policy", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.4})
    partner_pods = {r: pod(policy, r, node="n1",
                           placement=rendering.ProcPlacement("n1", str(r))) for r in (0, 1)}
    third = mesh("third", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.3})
    third_pods = [pod(third, r, node="n1", placement=rendering.ProcPlacement("n1", str(r)))
                  for r in (0, 1)]
    for fraction, waits in ((0.5, True), (0.7, False)):
        colocated = mesh("trainer", gpus={"mode": "pinned", "memoryFraction": fraction},
                         colocateWith="policy")
        refusal = place(colocated, [0, 1], partner=policy, partner_pods=partner_pods,
                        nodes={"n1": node("n1")},
                        other_pods=[*partner_pods.values(), *third_pods]).refusal
        assert refusal.reason == (contract.WAITING_FOR_GPU_BUDGET if waits
                                  else contract.BUDGET_EXCEEDED)
        assert refusal.waits is waits
    # With no node to spare, it waits for room on one.
    other = mesh("other", gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.7})
    others = [pod(other, r, node="n1", placement=rendering.ProcPlacement("n1", str(r)))
              for r in (0, 1)]
    refused = place(mesh(gpus=PINNED), [0, 1], nodes={"n1": node("n1")}, other_pods=others)
    assert refused.refusal.reason == contract.WAITING_FOR_GPU_BUDGET and refused.refusal.waits


def test_colocation_refusals_advise_what_the_api_server_allows_in_plain_text():
    """colocateWith and gpus are immutable (CEL), so the advice is to delete and create again;
    shapes and device lists read as text, not Python reprs."""
    trainer = mesh("trainer", colocateWith="policy")
    missing = place(trainer, [0]).refusal.message
    assert "fix the name" not in missing and "delete this one and create it again" in missing
    shape = place(trainer, [0], partner=mesh("policy", per_host=(("gpus", 4),))).refusal.message
    assert "shape hosts=1 x gpus=4, this mesh has hosts=1 x gpus=2" in shape
    devices = place(mesh("trainer", colocateWith="policy",
                         gpus={"mode": "pinned", "deviceIDs": [1, 0]}), [0],
                    partner=mesh("policy", gpus=PINNED)).refusal.message
    assert "omit deviceIDs or copy them" not in devices
    assert "deviceIDs are 1, 0 and differ from those of ProcMesh policy, 0, 1" in devices
    assert "delete this mesh and create it again" in devices
    for message in (missing, shape, devices):
        assert "[" not in message and "('" not in message, message
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [0, 3]})
    refusal = place(m, [0, 1], nodes={"n1": node("n1", gpus=2)}).refusal
    assert "(devices 0, 3)" in refusal.message and "[" not in refusal.message
