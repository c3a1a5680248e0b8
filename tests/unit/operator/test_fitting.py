"""The gang fit check of the scheduling-gate fallback (fitting.py), on plain dicts.

Aspects: quantities; a pod's requests (limits stand in for absent requests, init containers,
overhead, the pods slot); a node's room is allocatable minus bound live pods; the whole gang or
nothing; released-but-unbound pods are reserved first; node selectors, affinity terms, taints
and readiness decide eligibility; the message names the shortfall per node.
"""

import pytest

from procmesh_operator import fitting


def node(name, *, gpus=6, cpu="32", memory="128Gi", ready=True, labels=None, taints=()):
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": list(taints)},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, *, gpus=1, cpu=None, node_name=None, phase="Pending", gated=False, **spec):
    resources = {}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    body = {"metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "proc", "resources": resources}], **spec},
            "status": {"phase": phase}}
    if node_name:
        body["spec"]["nodeName"] = node_name
    if gated:
        body["spec"]["schedulingGates"] = [{"name": "procmesh.io/gang"}]
    return body


def gang(n, **kw):
    return [pod(f"m-{i}", gated=True, **kw) for i in range(n)]


@pytest.mark.parametrize("text,milli", [("1", 1000), ("500m", 500), ("2Gi", 2 * 2**30 * 1000),
                                        ("1.5", 1500), ("1e3", 10**6), (4, 4000), ("1k", 10**6)])
def test_quantities(text, milli):
    assert fitting.quantity(text) == milli


def test_a_bad_quantity_names_itself():
    with pytest.raises(ValueError, match="'12x'"):
        fitting.quantity("12x")


def test_requests_limits_init_containers_overhead_and_the_pods_slot():
    body = {"spec": {
        "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"},
                                      "requests": {"cpu": "1"}}},
                       {"resources": {"requests": {"cpu": "500m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        "overhead": {"cpu": "100m"}}}
    assert fitting.requests_of(body) == {"nvidia.com/gpu": 1000, "cpu": 3100, "pods": 1000}


def test_twelve_do_not_fit_six_units_and_six_do():
    assert fitting.fit(gang(6), [node("n")], []).fits
    verdict = fitting.fit(gang(12), [node("n")], [])
    assert not verdict.fits
    assert "12 procs must be placed together and only 6 fit" in verdict.message
    assert "n: Insufficient nvidia.com/gpu (0 free of 6)" in verdict.message


def test_bound_live_pods_take_room_and_finished_ones_do_not():
    held = [pod(f"o-{i}", node_name="n", phase="Running") for i in range(4)]
    assert not fitting.fit(gang(4), [node("n")], held).fits
    done = [pod(f"o-{i}", node_name="n", phase="Succeeded") for i in range(4)]
    assert fitting.fit(gang(4), [node("n")], done).fits


def test_the_gangs_own_pods_are_not_counted_against_it():
    mine = gang(6)
    assert fitting.fit(mine, [node("n")], mine).fits


def test_released_unbound_pods_are_reserved_first():
    released = [pod(f"r-{i}") for i in range(4)]  # no gate, no node: about to be bound
    assert not fitting.fit(gang(4), [node("n")], released).fits
    still_gated = [pod(f"g-{i}", gated=True) for i in range(4)]  # another gang, held
    assert fitting.fit(gang(4), [node("n")], still_gated).fits


def test_a_gang_spreads_over_nodes():
    assert fitting.fit(gang(8), [node("a", gpus=4), node("b", gpus=4)], []).fits
    assert not fitting.fit(gang(9), [node("a", gpus=4), node("b", gpus=4)], []).fits


def test_cpu_counts_too():
    verdict = fitting.fit(gang(3, gpus=0, cpu="12"), [node("n", gpus=0)], [])
    assert not verdict.fits and "Insufficient cpu (8 free of 32)" in verdict.message


def test_not_ready_and_cordoned_nodes_are_not_candidates():
    assert not fitting.fit(gang(1), [node("n", ready=False)], []).fits
    cordoned = node("n")
    cordoned["spec"]["unschedulable"] = True
    assert "n: unschedulable (cordoned)" in fitting.fit(gang(1), [cordoned], []).message
    # Unless the pod tolerates the cordon's taint, as the scheduler's NodeUnschedulable allows.
    tolerant = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                 "effect": "NoSchedule"}]
    assert fitting.fit(gang(1, tolerations=tolerant), [cordoned], []).fits


def test_node_selector_and_required_affinity():
    nodes = [node("plain"), node("gpu", labels={"nvidia.com/gpu.present": "true"})]
    term = {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In",
                                  "values": ["true"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}
    assert fitting.fit(gang(6, affinity=affinity), nodes, []).fits
    verdict = fitting.fit(gang(7, affinity=affinity), nodes, [])
    assert "plain: node does not match" in verdict.message
    assert not fitting.fit(gang(1, nodeSelector={"zone": "x"}), nodes, []).fits
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": ["plain"]}]}]}}}
    placed = [pod("o", node_name="plain", gpus=6, phase="Running")]
    assert not fitting.fit(gang(1, affinity=pinned), nodes, placed).fits


def test_taints_need_tolerations():
    taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    nodes = [node("n", taints=[taint])]
    assert "untolerated taint dedicated" in fitting.fit(gang(1), nodes, []).message
    tolerated = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert fitting.fit(gang(1, tolerations=tolerated), nodes, []).fits
    assert fitting.fit(gang(1, tolerations=[{"operator": "Exists"}]), nodes, []).fits


def test_untolerated_names_the_first_blocking_taint():
    taints = [{"key": "soft", "effect": "PreferNoSchedule"},
              {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
              {"key": "drain", "effect": "NoExecute"}]
    assert fitting.untolerated([], taints) == "untolerated taint gpu"
    gpu = {"key": "gpu", "operator": "Equal", "value": "a100"}  # no effect: either one
    assert fitting.untolerated([gpu], taints) == "untolerated taint drain"
    assert fitting.untolerated([gpu, {"key": "drain", "operator": "Exists"}], taints) is None
    assert fitting.untolerated([{**gpu, "value": "h100"}], taints) == "untolerated taint gpu"
    assert fitting.untolerated([{**gpu, "effect": "NoExecute"}], taints) == "untolerated taint gpu"
    assert fitting.untolerated([{"operator": "Exists", "effect": "NoSchedule"}], taints) == \
        "untolerated taint drain"
    assert fitting.untolerated([{"operator": "Exists"}], taints) is None


def test_blocking_taints_are_the_nodes_no_schedule_and_no_execute_ones():
    body = node("n", taints=[{"key": "soft", "effect": "PreferNoSchedule"},
                             {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
                             {"key": "drain", "effect": "NoExecute"}])
    assert fitting.blocking_taints(body) == {("gpu", "a100", "NoSchedule"), ("drain", "", "NoExecute")}
    assert fitting.blocking_taints({"metadata": {"name": "bare"}}) == frozenset()


def test_no_nodes_at_all():
    assert "the cluster has no nodes" in fitting.fit(gang(1), [], []).message
