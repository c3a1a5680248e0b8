"""dra mode without a cluster: the claims the operator renders, how pods reference them, and how
the allocation, the slices and the scheduler's messages are read back.

Aspects: one claim per host with one request per local index, owned by the mesh; deviceIDs and
user selectors become CEL selectors; sharing renders the NVIDIA GpuConfig; a pod references its
host's claim and its container only its request (a colocated mesh: the partner's); no GPU env of
ours; the allocated device's UUID and memory come from the slices; only the scheduler's
allocation failures count as unallocatable; the budget per claim slot refuses an overcommitted
device and counts the published memory; status.procs[].gpu is the claimed device.
"""

from typing import Any

import pytest

from mesh_client._src import contract
from procmesh_operator import claim_budgets, claiming, claims, planning, rendering, statuses

from .builders import SETTINGS, mesh, pod

DRA = {"mode": "dra", "deviceClassName": "gpu.nvidia.com"}
UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def owner(m):
    return rendering.owner_reference(m)


def test_one_claim_per_host_with_a_request_per_local_index():
    m = mesh("policy", hosts=2, per_host=(("replicas", 2), ("gpus", 3)), gpus=DRA)
    claim = claims.render_claim(m, 1, owner(m))
    assert claim["apiVersion"] == "resource.k8s.io/v1" and claim["kind"] == "ResourceClaim"
    assert claim["metadata"]["name"] == "policy-gpus-1"
    assert claim["metadata"]["labels"][contract.MESH_LABEL] == "policy"
    assert claim["metadata"]["ownerReferences"] == [owner(m)]
    requests = claim["spec"]["devices"]["requests"]
    assert [r["name"] for r in requests] == ["gpu-0", "gpu-1", "gpu-2"]
    assert all(r["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                "count": 1} for r in requests)
    assert "config" not in claim["spec"]["devices"]


def test_device_ids_and_selectors_become_cel():
    gpus = {**DRA, "deviceIDs": [UUID_A, UUID_B],
            "selectors": ['device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"']}
    m = mesh("p", per_host=(("gpus", 2),), gpus=gpus)
    requests = claims.render_claim(m, 0, owner(m))["spec"]["devices"]["requests"]
    for request, uuid in zip(requests, (UUID_A, UUID_B)):
        assert [s["cel"]["expression"] for s in request["exactly"]["selectors"]] == [
            'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"',
            f'device.attributes["gpu.nvidia.com"].uuid == "{uuid}"']


@pytest.mark.parametrize("sharing, rendered", [
    ({"strategy": "TimeSlicing", "interval": "Short"},
     {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}),
    ({"strategy": "MPS"}, {"strategy": "MPS"}),
])
def test_sharing_renders_the_nvidia_gpu_config(sharing, rendered):
    m = mesh("p", per_host=(("gpus", 2),), gpus={**DRA, "sharing": sharing})
    (config,) = claims.render_claim(m, 0, owner(m))["spec"]["devices"]["config"]
    assert config == {"requests": ["gpu-0", "gpu-1"], "opaque": {"driver": "gpu.nvidia.com",
                      "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                                     "kind": "GpuConfig", "sharing": rendered}}}


def test_pods_reference_their_host_claim_and_request():
    m = mesh("trainer", hosts=2, per_host=(("gpus", 2),), colocateWith="policy",
             gpus={"mode": "dra", "memoryFraction": 0.5})
    p = rendering.render_pod(m, 3, rendering.ProcPlacement(), SETTINGS)
    assert p["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "policy-gpus-1"}]
    container = p["spec"]["containers"][0]
    assert container["resources"]["claims"] == [{"name": "gpu", "request": "gpu-1"}]
    names = {e["name"] for e in container["env"]}
    assert not names & {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}  # the driver's job
    assert "affinity" not in p["spec"]  # the scheduler places
    assert claims.pod_slot(p) == ("policy-gpus-1", "gpu-1") == claims.slot_of(m, 3)


def allocated(claim_name, results):
    return {"metadata": {"name": claim_name}, "status": {"allocation": {"devices": {"results": [
        {"request": r, "driver": "gpu.nvidia.com", "pool": "n1", "device": d}
        for r, d in results]}}}}


SLICES = ({"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "n1"}, "devices": [
    {"name": "gpu-0", "attributes": {"uuid": {"string": UUID_A}},
     "capacity": {"memory": {"value": "143771Mi"}}},
    {"name": "gpu-1", "attributes": {"uuid": {"string": UUID_B}},
     "capacity": {"memory": {"value": "80Gi"}}}]}},)


def test_the_allocation_and_slices_give_uuid_and_memory():
    m = mesh("policy", per_host=(("gpus", 2),), gpus=DRA)
    view = claiming.ClaimView({"policy-gpus-0": allocated("policy-gpus-0",
                                                          [("gpu-0", "gpu-1"), ("gpu-1", "gpu-0")])},
                              SLICES)
    assert view.gpus_by_rank(m) == {0: UUID_B, 1: UUID_A}
    assert view.slot_memory() == {("policy-gpus-0", "gpu-0"): 80 * 1024,
                                  ("policy-gpus-0", "gpu-1"): 143771}
    assert claiming.ClaimView({}).gpus_by_rank(m) == {}
    assert claims.device_label((), ("gpu.nvidia.com", "n1", "gpu-7")) == "n1/gpu-7"
    assert claims.quantity_mib("1073741824") == 1024 and claims.quantity_mib("lots") is None


def test_a_withdrawn_slice_leaves_the_uuid_and_memory_it_published():
    """A driver restarting withdraws its ResourceSlice while the claims stay allocated: the
    status kept saying pool/device and the budget the default memory until it came back."""
    m = mesh("policy", per_host=(("gpus", 2),), gpus=DRA)
    claim = {"policy-gpus-0": allocated("policy-gpus-0", [("gpu-0", "gpu-1"), ("gpu-1", "gpu-0")])}
    devices = [(contract.DRA_DRIVER, "n1", "gpu-1"), (contract.DRA_DRIVER, "n1", "gpu-0")]
    memo = claiming.PublishedDevices()
    assert claiming.ClaimView(claim, memo.fill_in(SLICES, devices)).gpus_by_rank(m) == {0: UUID_B, 1: UUID_A}
    withdrawn = claiming.ClaimView(claim, memo.fill_in((), devices))
    assert withdrawn.gpus_by_rank(m) == {0: UUID_B, 1: UUID_A}
    assert withdrawn.slot_memory() == {("policy-gpus-0", "gpu-0"): 80 * 1024,
                                       ("policy-gpus-0", "gpu-1"): 143771}
    assert claiming.ClaimView(claim, ()).gpus_by_rank(m) == {0: "n1/gpu-1", 1: "n1/gpu-0"}  # none seen
    unseen = claiming.PublishedDevices().fill_in((), devices)
    assert unseen == ()


def test_the_published_devices_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(claiming.PublishedDevices, "LIMIT", 2)
    memo = claiming.PublishedDevices()
    devices = [(contract.DRA_DRIVER, "n1", "gpu-1"), (contract.DRA_DRIVER, "n1", "gpu-0")]
    memo.fill_in(SLICES, devices)
    memo.fill_in(SLICES, devices[:1])  # gpu-1 seen again: the newest
    other = {"spec": {"driver": contract.DRA_DRIVER, "pool": {"name": "n2"}, "devices": [{"name": "gpu-9"}]}}
    memo.fill_in([other], [(contract.DRA_DRIVER, "n2", "gpu-9")])
    assert len(memo) == 2
    assert len(memo.fill_in((), devices)) == 1  # gpu-0, the oldest, was dropped


def test_a_colocated_mesh_is_settled_once_it_owns_the_claims():
    policy = mesh("policy", per_host=(("gpus", 1),), gpus=DRA)
    trainer = mesh("trainer", per_host=(("gpus", 1),), colocateWith="policy", gpus={"mode": "dra"})
    claim = claims.render_claim(policy, 0, owner(policy))
    assert claiming.settled(policy, claiming.ClaimView({"policy-gpus-0": claim}))
    assert not claiming.settled(trainer, claiming.ClaimView({"policy-gpus-0": claim}))
    claim["metadata"]["ownerReferences"].append({**owner(trainer), "controller": False})
    assert claiming.settled(trainer, claiming.ClaimView({"policy-gpus-0": claim}))
    assert not claiming.settled(trainer, claiming.ClaimView({}))


def unscheduled(m, rank, message):
    body = pod(m, rank, phase="Pending", ready=False, node=None, ip=None)
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable", "message": message}]
    return body


@pytest.mark.parametrize("message, unallocatable", [
    ("0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match.", True),
    ("0/3 nodes are available: request gpu-0: device class gpu.example.com does not exist.", True),
    ("0/3 nodes are available: resource claim ns/p-gpus-0 is in the process of being allocated.",
     False),
    ("0/3 nodes are available: 3 Insufficient cpu.", False),
])
def test_only_allocation_failures_are_unallocatable(message, unallocatable):
    m = mesh("p", per_host=(("gpus", 1),), gpus=DRA)
    body = unscheduled(m, 0, message)
    assert (claims.unschedulable_claim_message(body) == message) is unallocatable
    plan = planning.Plan()
    status = statuses.compute_status(m, None, {0: body}, plan)
    ready = statuses.condition(status["conditions"], contract.READY)
    assert (ready["reason"] == contract.CLAIM_UNALLOCATABLE) is unallocatable
    if unallocatable:
        assert message in ready["message"] and contract.CLAIM_UNALLOCATABLE in contract.FATAL_REASONS


def test_budget_per_claim_slot():
    policy = mesh("policy", per_host=(("gpus", 2),), gpus={**DRA, "memoryFraction": 0.7})
    greedy = mesh("greedy", per_host=(("gpus", 2),), colocateWith="policy",
                  gpus={"mode": "dra", "memoryFraction": 0.5})
    modest = mesh("modest", per_host=(("gpus", 2),), colocateWith="policy",
                  gpus={"mode": "dra", "memoryFraction": 0.2})
    running = [pod(policy, r) for r in range(2)]
    refused = claim_budgets.place(greedy, [0, 1], own_pods={}, other_pods=running, slot_memory={},
                                  settings=SETTINGS)
    assert refused.refusal is not None and refused.refusal.reason == contract.BUDGET_EXCEEDED
    assert "policy-gpus-0/gpu-0" in refused.refusal.message and "policy-0=0.7" in refused.refusal.message
    fits = claim_budgets.place(modest, [0, 1], own_pods={}, other_pods=running, slot_memory={},
                               settings=SETTINGS)
    assert fits.refusal is None and set(fits.procs) == {0, 1}
    # A small device (its published memory) makes the same pair overflow: the contexts count.
    small = {("policy-gpus-0", "gpu-0"): 2048}
    tight = claim_budgets.place(modest, [0], own_pods={}, other_pods=running, slot_memory=small,
                                settings=SETTINGS)
    assert tight.refusal is not None and "2048 MiB" in tight.refusal.message


def test_a_slot_no_wait_clears_is_refused_though_another_waits_for_room():
    """Slot 0 overflows only with a third mesh's proc (it may leave), slot 1, a smaller device,
    with its partner's procs alone: the mesh can never be placed, so it is no wait."""
    policy = mesh("policy", per_host=(("gpus", 2),), gpus={**DRA, "memoryFraction": 0.3})
    third = mesh("third", per_host=(("gpus", 2),), colocateWith="policy",
                 gpus={"mode": "dra", "memoryFraction": 0.4})
    modest = mesh("modest", per_host=(("gpus", 2),), colocateWith="policy",
                  gpus={"mode": "dra", "memoryFraction": 0.3})
    running = [pod(policy, 0), pod(policy, 1), pod(third, 0)]
    small = {("policy-gpus-0", "gpu-1"): 2048}
    refused = claim_budgets.place(modest, [0, 1], own_pods={}, other_pods=running,
                                  slot_memory=small, settings=SETTINGS)
    assert refused.refusal is not None and refused.refusal.reason == contract.BUDGET_EXCEEDED
    assert "policy-gpus-0/gpu-1" in refused.refusal.message
    waits = claim_budgets.place(modest, [0, 1], own_pods={}, other_pods=running, slot_memory={},
                                settings=SETTINGS)  # slot 1 a device as large as slot 0
    assert waits.refusal is not None and waits.refusal.reason == contract.WAITING_FOR_GPU_BUDGET


def test_plan_in_dra_mode_refuses_a_non_dra_partner():
    policy = mesh("policy", per_host=(("gpus", 1),), gpus={"mode": "pinned", "deviceIDs": [0]})
    trainer = mesh("trainer", per_host=(("gpus", 1),), colocateWith="policy", gpus={"mode": "dra"})
    plan = planning.plan(trainer, restarts=0, pods={}, partner=policy, settings=SETTINGS)
    assert plan.refusal is not None and plan.refusal.reason == contract.INVALID_COLOCATION
    assert not plan.creates


def test_status_reports_the_claimed_gpu():
    m = mesh("policy", per_host=(("gpus", 2),), gpus=DRA)
    pods = {r: pod(m, r) for r in range(2)}
    status = statuses.compute_status(m, None, pods, planning.Plan(), claimed_gpus={1: UUID_B})
    assert [p.get("gpu") for p in status["procs"]] == [None, UUID_B]
    budget = statuses.condition(status["conditions"], contract.GPU_BUDGET)
    assert budget["status"] == "True" and "kube-scheduler" in budget["message"]


def _deleting_claim(*holders: str) -> dict[str, Any]:
    return {"metadata": {"name": "m-gpus-0", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"reservedFor": [{"resource": "pods", "name": h, "uid": h}
                                       for h in holders]}}


def test_a_claim_deleted_under_running_procs_is_reported_only_while_they_hold_it():
    pending: dict[str, Any] = {"metadata": {"name": "m-1"}, "spec": {}}
    message = claims.deleted_claim_message(pending, _deleting_claim("m-0"), going=())
    assert message is not None and "m-gpus-0 is being deleted" in message and "(m-0)" in message
    assert "suspend and resume the mesh and" in message
    # A colocated mesh's pods use its partner's claims: only the partner's suspend makes them again.
    partners = claims.deleted_claim_message(pending, _deleting_claim("m-0"), going=(), owner="policy")
    assert partners is not None and "suspend and resume ProcMesh policy, whose claim it is, and" in partners
    # Passing states: held by nothing, or only by pods that are ending; a claim not deleted; a
    # pod already on a node.
    assert claims.deleted_claim_message(pending, _deleting_claim(), going=()) is None
    assert claims.deleted_claim_message(pending, _deleting_claim("m-0"), going={"m-0"}) is None
    assert claims.deleted_claim_message(pending, {"metadata": {"name": "m-gpus-0"}}, ()) is None
    bound = {"metadata": {"name": "m-1"}, "spec": {"nodeName": "n"}}
    assert claims.deleted_claim_message(bound, _deleting_claim("m-0"), going=()) is None
