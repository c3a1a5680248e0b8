"""A mesh as one gang (ganging.py) and its Scheduled condition (statuses.py).

Aspects: the mode from ``--gang`` and API discovery; the PodGroup (a gang of every proc, owned
by the mesh); pods joining by schedulingGroup or by our gate, without touching another gate;
the holds' messages; Scheduled and Ready as compute_status reports them.
"""

from mesh_client._src import contract
from procmesh_operator import ganging, planning, rendering, statuses

from .builders import SETTINGS, mesh, pod

DISCOVERY = {"kind": "APIResourceList", "groupVersion": "scheduling.k8s.io/v1alpha2",
             "resources": [{"name": "podgroups"}, {"name": "podgroups/status"},
                           {"name": "workloads"}]}


def test_auto_picks_the_pod_group_api_where_it_is_served():
    assert ganging.resolve_mode("auto", DISCOVERY) == ganging.POD_GROUP
    assert ganging.resolve_mode("auto", None) == ganging.GATE
    assert ganging.resolve_mode("auto", {"resources": [{"name": "workloads"}]}) == ganging.GATE
    assert ganging.resolve_mode("off", DISCOVERY) == ganging.OFF
    assert ganging.resolve_mode("gate", DISCOVERY) == ganging.GATE


def test_the_pod_group_is_a_gang_of_every_proc_owned_by_the_mesh():
    m = mesh("trainer", hosts=2, per_host=(("gpus", 3),))
    group = ganging.render_pod_group(m)
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2" and group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == "trainer-uid-trai"  # name and uid: per incarnation
    assert group["metadata"]["namespace"] == "ns"
    assert group["metadata"]["ownerReferences"][0]["uid"] == m.uid
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 6}}}
    assert ganging.pod_groups_path("ns", "trainer") == \
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/trainer"


def test_pods_join_by_scheduling_group_or_by_our_gate():
    m = mesh("m")
    rendered = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
    native = ganging.join(rendered, m, ganging.POD_GROUP)
    assert native["spec"]["schedulingGroup"] == {"podGroupName": "m-uid-m"}
    assert "schedulingGates" not in native["spec"]
    gated = ganging.join(rendered, m, ganging.GATE)
    assert gated["spec"]["schedulingGates"] == [{"name": contract.GANG_GATE}]
    assert ganging.is_gated(gated) and not ganging.is_gated(rendered)
    assert ganging.join(rendered, m, ganging.OFF) == rendered
    assert "schedulingGates" not in rendered["spec"]  # join copies
    assert "schedulingGroup" not in rendered["spec"]


def test_lifting_our_gate_keeps_anyone_elses():
    m = mesh("m")
    rendered = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
    rendered["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    gated = ganging.join(rendered, m, ganging.GATE)
    assert ganging.ungate_patch(gated) == {"spec": {"schedulingGates": [{"name": "example.com/quota"}]}}
    assert rendered["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]  # unchanged
    assert ganging.ungate_patch(ganging.join(pod(m, 0), m, ganging.GATE)) == \
        {"spec": {"schedulingGates": None}}


def test_the_gate_waits_for_every_pod():
    m = mesh("m", per_host=(("gpus", 3),))
    hold = ganging.waiting_hold(m, {0: pod(m, 0)})
    assert hold is not None and hold.reason == ganging.WAITING_FOR_GANG
    assert hold.message.startswith("1 of 3 pods exist")
    assert ganging.waiting_hold(m, {r: pod(m, r) for r in range(3)}) is None


def test_the_schedulers_hold_quotes_the_group_the_pod_and_our_check():
    m = mesh("m")
    waiting = pod(m, 1, node=None, phase="Pending")
    waiting["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable",
                                        "message": "0/2 nodes are available"}]
    group = {"status": {"conditions": [{"type": "PodGroupScheduled", "status": "False",
                                        "reason": "Unschedulable",
                                        "message": "pod group is unschedulable"}]}}
    hold = ganging.scheduler_hold(group, [pod(m, 0), waiting], "2 procs must be placed")
    assert hold is not None and hold.reason == "Unschedulable"
    assert "pod group is unschedulable; pod m-1 is Pending: 0/2 nodes are available; the operator's " \
           "check: 2 procs must be placed" in hold.message
    only_pod = ganging.scheduler_hold(None, [waiting])  # the pod's word came first
    assert only_pod is not None and only_pod.reason == "Unschedulable"
    assert ganging.scheduler_hold({"status": {}}, [pod(m, 0)]) is None  # nothing said yet


def conds(status):
    return {c["type"]: c for c in status["conditions"]}


def test_scheduled_is_true_once_every_proc_is_on_a_node():
    m = mesh("m")
    status = statuses.compute_status(m, None, {0: pod(m, 0), 1: pod(m, 1)}, planning.Plan())
    assert conds(status)["Scheduled"]["status"] == "True"
    assert conds(status)["Scheduled"]["reason"] == ganging.ALL_PROCS_SCHEDULED


def test_a_held_gang_says_why_in_scheduled_and_ready():
    m = mesh("m")
    pods = {r: ganging.join(pod(m, r, node=None, phase="Pending", ready=False), m, ganging.GATE)
            for r in range(2)}
    hold = ganging.Hold(ganging.UNSCHEDULABLE, "2 procs must be placed together and only 1 fit")
    c = conds(statuses.compute_status(m, None, pods, planning.Plan(), hold=hold))
    assert (c["Scheduled"]["status"], c["Scheduled"]["reason"]) == ("False", "Unschedulable")
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "Unschedulable")
    assert "only 1 fit" in c["Ready"]["message"]
    assert c["Progressing"]["status"] == "True"  # waiting for room is not being stuck


def test_without_a_hold_the_first_unbound_pods_scheduler_reason_shows():
    m = mesh("m")
    waiting = pod(m, 1, node=None, phase="Pending", ready=False)
    waiting["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": "0/1 nodes"}]
    c = conds(statuses.compute_status(m, None, {0: pod(m, 0), 1: waiting}, planning.Plan()))
    assert c["Scheduled"]["reason"] == "Unschedulable"
    assert c["Scheduled"]["message"] == "1 of 2 procs on nodes; pod m-1 is Pending: 0/1 nodes"


def test_a_suspended_mesh_is_not_scheduled():
    m = mesh("m", suspend=True)
    c = conds(statuses.compute_status(m, None, {}, planning.Plan()))
    assert (c["Scheduled"]["status"], c["Scheduled"]["reason"]) == ("False", "Suspended")


def test_a_one_proc_mesh_needs_no_gang():
    assert ganging.mode_for(ganging.POD_GROUP, mesh("m", per_host=(("gpus", 1),))) == ganging.OFF
    assert ganging.mode_for(ganging.GATE, mesh("m")) == ganging.GATE


def test_a_dra_mesh_is_gated_rather_than_in_a_pod_group():
    dra = mesh("m", gpus={"mode": "dra", "deviceClassName": "gpu.nvidia.com"})
    assert ganging.mode_for(ganging.POD_GROUP, dra) == ganging.GATE
    assert ganging.mode_for(ganging.OFF, dra) == ganging.OFF
    assert ganging.mode_for(ganging.POD_GROUP, mesh("m")) == ganging.POD_GROUP
