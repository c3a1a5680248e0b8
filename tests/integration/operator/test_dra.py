"""gpus.mode dra on the real control plane: the kube-scheduler's DRA allocator places the claims,
the process node (acting as the NVIDIA DRA driver, dra-node: 2 emulated GPUs in a ResourceSlice)
exposes exactly the allocated device.

Aspects: a dra mesh's claims are allocated by the scheduler and each proc sees exactly its
claim's device, which status.procs[].gpu reports from the allocation; a colocated mesh's pods
reference the same claims, so both land on the same node and device, and it becomes a second
owner of the claims; an over-committed device is refused with a condition and no pods; a claim
that cannot be allocated shows the scheduler's reason in a condition; deviceIDs select by UUID
and sharing renders the driver's config; a restarted proc keeps its claim's device; deleting the
meshes deletes their claims; a claim deleted by hand under running procs is reported when a
restarted proc waits for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dra_node", "devices_free")]

GPUS_2 = [{"name": "gpus", "size": 2}]
CLASS = "gpu.nvidia.com"


def claims(custom: Any, namespace: str) -> dict[str, dict[str, Any]]:
    listed = custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace,
                                                  "resourceclaims")
    return {c["metadata"]["name"]: c for c in listed["items"]}


def slice_uuids(custom: Any, node: str) -> dict[str, str]:
    """Device name -> uuid attribute of the node's published devices."""
    listed = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    out = {}
    for item in listed["items"]:
        if item["spec"].get("nodeName") == node and item["spec"]["driver"] == "gpu.nvidia.com":
            for device in item["spec"]["devices"]:
                out[device["name"]] = device["attributes"]["uuid"]["string"]
    return out


def test_dra_pair_shares_claims(operator, namespace, custom, core, dra_node):
    support.create_mesh(custom, namespace, "policy", perHost=GPUS_2,
                        gpus={"mode": "dra", "deviceClassName": CLASS, "memoryFraction": 0.4})
    support.create_mesh(custom, namespace, "trainer", perHost=GPUS_2, colocateWith="policy",
                        gpus={"mode": "dra", "memoryFraction": 0.5})
    policy = support.wait_ready(custom, namespace, "policy")
    trainer = support.wait_ready(custom, namespace, "trainer")
    assert support.condition(trainer, "GPUBudgetSatisfied")["status"] == "True"

    found = claims(custom, namespace)
    assert list(found) == ["policy-gpus-0"]  # one claim per host; the trainer has none
    claim = found["policy-gpus-0"]
    assert [r["name"] for r in claim["spec"]["devices"]["requests"]] == ["gpu-0", "gpu-1"]
    owners = {o["name"]: o.get("controller", False) for o in claim["metadata"]["ownerReferences"]}
    assert owners == {"policy": True, "trainer": False}
    reserved = {r["name"] for r in claim["status"]["reservedFor"]}
    assert reserved == {"policy-0", "policy-1", "trainer-0", "trainer-1"}
    allocated = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
    uuids = slice_uuids(custom, dra_node)
    policy_token = support.token(core, namespace, "policy")
    trainer_token = support.token(core, namespace, "trainer")
    seen = set()
    for rank in (0, 1):
        result = allocated[f"gpu-{rank}"]
        assert (result["driver"], result["pool"]) == ("gpu.nvidia.com", dra_node)
        uuid = uuids[result["device"]]
        seen.add(uuid)
        p, t = policy["status"]["procs"][rank], trainer["status"]["procs"][rank]
        assert p["node"] == t["node"] == dra_node
        assert p["gpu"] == t["gpu"] == uuid  # from the claim's allocation, not from the proc
        pod = core.read_namespaced_pod(f"trainer-{rank}", namespace)
        assert [(c.name, c.resource_claim_name) for c in pod.spec.resource_claims] == \
            [("gpu", "policy-gpus-0")]
        assert [(c.name, c.request) for c in pod.spec.containers[0].resources.claims] == \
            [("gpu", f"gpu-{rank}")]
        assert "NVIDIA_VISIBLE_DEVICES" not in support.env_of(pod)  # the node sets it, not us
        # What each proc itself sees: exactly the claimed device.
        assert support.identify(p["address"], policy_token)["gpu"] == uuid
        assert support.identify(t["address"], trainer_token)["gpu"] == uuid
    assert len(seen) == 2  # two requests, two devices

    # Deleting both meshes deletes the claim (garbage collection, through the owners).
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                           "policy")
    testing.wait_for(lambda: not support.mesh_pods(core, namespace, "policy"), "policy pods gone")
    assert "policy-gpus-0" in claims(custom, namespace)  # the trainer still uses it
    assert support.get_mesh(custom, namespace, "trainer")["status"]["readyProcs"] == 2
    custom.delete_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                           "trainer")
    testing.wait_for(lambda: not claims(custom, namespace), "the claim deleted with its meshes")


def test_dra_budget_is_refused(operator, namespace, custom, core, dra_node):
    support.create_mesh(custom, namespace, "big", perHost=GPUS_2,
                        gpus={"mode": "dra", "deviceClassName": CLASS, "memoryFraction": 0.7})
    support.wait_ready(custom, namespace, "big")
    support.create_mesh(custom, namespace, "greedy", perHost=GPUS_2, colocateWith="big",
                        gpus={"mode": "dra", "memoryFraction": 0.5})
    mesh = support.wait_condition(custom, namespace, "greedy", "GPUBudgetSatisfied", "False",
                                  "GPUBudgetExceeded")  # with its partner's: no wait clears it
    message = support.condition(mesh, "GPUBudgetSatisfied")["message"]
    assert "big-gpus-0/gpu-0" in message and "big-0=0.7" in message and "greedy-0=0.5" in message
    assert mesh["status"]["phase"] == "Failed"
    assert support.condition(mesh, "Ready")["status"] == "False"
    assert support.mesh_pods(core, namespace, "greedy") == []


def test_unallocatable_claim_is_reported(operator, namespace, custom, core, dra_node):
    absent = "GPU-00000000-0000-0000-0000-000000000000"
    support.create_mesh(custom, namespace, "nowhere", perHost=[{"name": "gpus", "size": 1}],
                        gpus={"mode": "dra", "deviceClassName": CLASS, "deviceIDs": [absent]})
    mesh = support.wait_condition(custom, namespace, "nowhere", "Ready", "False",
                                  "ResourceClaimUnallocatable")
    message = support.condition(mesh, "Ready")["message"]
    assert "nowhere-0" in message and "cannot allocate all claims" in message
    claim = claims(custom, namespace)["nowhere-gpus-0"]
    selectors = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
    assert selectors == [{"cel": {"expression":
                                  f'device.attributes["gpu.nvidia.com"].uuid == "{absent}"'}}]
    assert not claim.get("status", {}).get("allocation")


def test_uuid_selects_the_device(operator, namespace, custom, core, dra_node):
    uuids = slice_uuids(custom, dra_node)
    wanted = uuids["gpu-1"]
    support.create_mesh(custom, namespace, "picky", perHost=[{"name": "gpus", "size": 1}],
                        gpus={"mode": "dra", "deviceClassName": CLASS, "deviceIDs": [wanted],
                              "sharing": {"strategy": "TimeSlicing", "interval": "Long"}})
    mesh = support.wait_ready(custom, namespace, "picky")
    assert mesh["status"]["procs"][0]["gpu"] == wanted
    claim = claims(custom, namespace)["picky-gpus-0"]
    (config,) = claim["spec"]["devices"]["config"]
    assert config["opaque"]["driver"] == "gpu.nvidia.com"
    assert config["opaque"]["parameters"] == {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}
    token = support.token(core, namespace, "picky")
    assert support.identify(mesh["status"]["procs"][0]["address"], token)["gpu"] == wanted


def test_restarted_proc_keeps_its_claimed_device(operator, namespace, custom, core, dra_node):
    support.create_mesh(custom, namespace, "again", perHost=GPUS_2, restartPolicy="RestartProc",
                        gpus={"mode": "dra", "deviceClassName": CLASS})
    mesh = support.wait_ready(custom, namespace, "again")
    before = [p["gpu"] for p in mesh["status"]["procs"]]
    old_uid = core.read_namespaced_pod("again-1", namespace).metadata.uid
    token = support.token(core, namespace, "again")
    support.kill_proc(mesh["status"]["procs"][1]["address"], token)

    def restarted_and_ready():
        m = support.get_mesh(custom, namespace, "again")
        ready = support.condition(m, "Ready").get("status") == "True"
        return m if ready and m["status"]["restarts"] == 1 else None

    mesh = testing.wait_for(restarted_and_ready, "restart counted and mesh Ready again")
    assert core.read_namespaced_pod("again-1", namespace).metadata.uid != old_uid
    assert [p["gpu"] for p in mesh["status"]["procs"]] == before  # the claim keeps its device
    assert support.identify(mesh["status"]["procs"][1]["address"], token)["gpu"] == before[1]


def test_claim_deleted_under_running_procs_is_reported(operator, namespace, custom, core, kube,
                                                       dra_node):
    """A claim deleted by hand stays (delete-protection) while a running proc holds it, and the
    scheduler places no pod on it: a restarted proc says so, the client fails at once, and a
    suspend and resume gets a new claim and every proc back."""
    from mesh_client.kubernetes import MeshNotReady, attach

    support.create_mesh(custom, namespace, "doomed", perHost=GPUS_2, restartPolicy="RestartProc",
                        gpus={"mode": "dra", "deviceClassName": CLASS, "memoryFraction": 0.3})
    support.wait_ready(custom, namespace, "doomed")
    custom.delete_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims",
                                           "doomed-gpus-0")
    assert claims(custom, namespace)["doomed-gpus-0"]["metadata"]["deletionTimestamp"]
    core.delete_namespaced_pod("doomed-1", namespace)  # a proc that ends, to be restarted

    mesh = support.wait_condition(custom, namespace, "doomed", "Ready", "False",
                                  "ResourceClaimDeleted")
    message = support.condition(mesh, "Ready")["message"]
    assert "pod doomed-1 cannot be scheduled" in message, message
    assert "ResourceClaim doomed-gpus-0 is being deleted" in message, message
    assert "(doomed-0)" in message, message  # the proc that holds it
    with pytest.raises(MeshNotReady) as info:
        attach("doomed", namespace, api_client=kube, timeout=300, progress=False)
    assert info.value.reason == "ResourceClaimDeleted"
    assert "was not Ready after" not in str(info.value)  # it did not wait for the timeout

    # The way out the message names: suspend (the claim goes with its pods), resume.
    support.patch_mesh(custom, namespace, "doomed", {"suspend": True})
    testing.wait_for(lambda: "doomed-gpus-0" not in claims(custom, namespace),
                     "the deleted claim gone with the pods that held it")
    support.patch_mesh(custom, namespace, "doomed", {"suspend": False})
    mesh = support.wait_ready(custom, namespace, "doomed")
    assert not claims(custom, namespace)["doomed-gpus-0"]["metadata"].get("deletionTimestamp")
    assert all(p["gpu"].startswith("GPU-") for p in mesh["status"]["procs"])
