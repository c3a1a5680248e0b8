"""The process node as the NVIDIA DRA driver (pure parts): the ResourceSlice it publishes and the
devices it prepares for a container's claims.

Aspects: the slice has the driver's name, a pool named after the node, one ``gpu-<minor>``
device per GPU with the driver's attribute names and its memory capacity; a DRA node advertises
no device plugin resource; a container gets exactly the devices allocated to its claim request;
a claim not reserved for the pod, not allocated here, or absent is refused (the container waits).
"""

import pytest

from tests.cluster.process_node import dra, gpus, registration
from tests.cluster.process_node.config import NodeConfig

CONFIG = NodeConfig("dra-a", gpus=2, dra=True)
DEVICES = gpus.devices(CONFIG, real_uuids={})


def test_the_slice_has_the_nvidia_driver_layout():
    body = dra.slice_object(CONFIG, DEVICES, "node-uid")
    spec = body["spec"]
    assert (spec["driver"], spec["nodeName"]) == ("gpu.nvidia.com", "dra-a")
    assert spec["pool"] == {"name": "dra-a", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    first = spec["devices"][0]
    assert set(first["attributes"]) == {"type", "uuid", "productName", "brand", "architecture",
                                        "cudaComputeCapability", "driverVersion",
                                        "cudaDriverVersion"}
    assert first["attributes"]["type"] == {"string": "gpu"}
    assert first["attributes"]["uuid"] == {"string": DEVICES[0].uuid}
    assert first["capacity"] == {"memory": {"value": f"{CONFIG.gpu_memory_mib}Mi"}}
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Node"


def test_a_dra_node_has_no_device_plugin_resource():
    assert "nvidia.com/gpu" not in registration.resources(CONFIG)
    assert registration.gfd_labels(CONFIG) == {}
    assert registration.resources(NodeConfig("plain", gpus=2))["nvidia.com/gpu"] == "2"


POD = {"metadata": {"namespace": "ns", "uid": "pod-uid"},
       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "m-gpus-0"}]}}


def claim(results, reserved=("pod-uid",)):
    return {"status": {"reservedFor": [{"uid": u} for u in reserved], "allocation": {"devices": {
        "results": [{"request": r, "driver": "gpu.nvidia.com", "pool": pool, "device": d}
                    for r, pool, d in results]}}}}


def test_the_container_gets_exactly_its_request():
    container = {"resources": {"claims": [{"name": "gpu", "request": "gpu-1"}]}}
    found = claim([("gpu-0", "dra-a", "gpu-0"), ("gpu-1", "dra-a", "gpu-1")])
    got = dra.claimed_devices(POD, container, "dra-a", DEVICES, lambda ns, n: found)
    assert got == [DEVICES[1]]
    assert dra.claimed_devices(POD, {}, "dra-a", DEVICES, lambda ns, n: found) is None


@pytest.mark.parametrize("found, message", [
    (None, "does not exist"),
    (claim([("gpu-0", "dra-a", "gpu-0")], reserved=()), "not reserved for this pod"),
    (claim([("gpu-0", "other-node", "gpu-0")]), "is not on node dra-a"),
])
def test_a_claim_not_ready_for_the_pod_is_refused(found, message):
    container = {"resources": {"claims": [{"name": "gpu", "request": "gpu-0"}]}}
    with pytest.raises(dra.ClaimError, match=message):
        dra.claimed_devices(POD, container, "dra-a", DEVICES, lambda ns, n: found)
