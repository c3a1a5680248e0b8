"""spawn_procs(gpus="dra") as a ProcMesh manifest: the device class by default or as given, none
for a colocated mesh (it uses its partner's claims), and device_class refused in other modes; spec.placement.hosts as given, and checked."""

import pytest

from mesh_client._src.kubernetes import manifests


def test_dra_names_the_nvidia_class_by_default():
    body = manifests.proc_mesh_manifest("p", hosts=1, per_host={"gpus": 2}, gpus="dra", memory_fraction=0.4)
    assert body["spec"]["gpus"] == {"mode": "dra", "deviceClassName": "gpu.nvidia.com", "memoryFraction": 0.4}
    mine = manifests.proc_mesh_manifest("q", hosts=1, per_host={"gpus": 2}, gpus="dra", device_class="gpu.example.com")
    assert mine["spec"]["gpus"]["deviceClassName"] == "gpu.example.com"


def test_colocated_dra_mesh_uses_its_partners_claims():
    body = manifests.proc_mesh_manifest("t", hosts=1, per_host={"gpus": 2}, gpus="dra", colocate_with="p")
    assert body["spec"]["gpus"] == {"mode": "dra"} and body["spec"]["colocateWith"] == "p"


def test_device_class_needs_dra():
    with pytest.raises(ValueError, match="only meaningful with gpus='dra'"):
        manifests.proc_mesh_manifest("p", hosts=1, per_host={"gpus": 1}, gpus="plugin", device_class="x")


def test_host_placement_is_the_crds_and_checked():
    assert "placement" not in manifests.proc_mesh_manifest("p", hosts=2, per_host={"procs": 1})["spec"]
    body = manifests.proc_mesh_manifest("p", hosts=2, per_host={"procs": 1}, host_placement="Any")
    assert body["spec"]["placement"] == {"hosts": "Any"}
    with pytest.raises(ValueError, match="give one of DistinctNodes, Any"):
        manifests.proc_mesh_manifest("p", hosts=2, per_host={"procs": 1}, host_placement="Anywhere")
