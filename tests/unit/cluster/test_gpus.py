"""The emulated device plugin and NVIDIA runtime of the process node (pure functions)."""

import pytest

from tests.cluster.process_node import gpus
from tests.cluster.process_node.config import NodeConfig


def _devices(host=(0, 1, 2, 3)):
    return gpus.devices(NodeConfig("n", host_gpus=tuple(host)), real_uuids={})


def test_devices_have_stable_made_up_uuids_and_host_indices():
    first, again = _devices((2, 3)), _devices((2, 3))
    assert first == again
    assert [(d.index, d.host_index) for d in first] == [(0, 2), (1, 3)]
    assert all(d.uuid.startswith("GPU-") for d in first)


def test_allocator_picks_the_least_used_device_counting_replicas():
    allocator = gpus.Allocator(_devices((0, 1)), replicas=2)
    picks = [allocator.allocate(f"pod{i}", "c", 1)[0].index for i in range(4)]
    assert picks == [0, 1, 0, 1]
    with pytest.raises(gpus.DeviceError):
        allocator.allocate("pod5", "c", 1)
    allocator.release("pod1")
    assert allocator.allocate("pod6", "c", 1)[0].index == 1


def test_allocator_spreads_one_containers_units_over_devices():
    allocator = gpus.Allocator(_devices((0, 1)), replicas=2)
    assert [d.index for d in allocator.allocate("p", "c", 2)] == [0, 1]
    assert allocator.allocate("p", "c", 2) == allocator.allocate("p", "c", 2)  # idempotent


@pytest.mark.parametrize(("nvidia", "cuda", "host"), [
    (None, None, ""),                 # no GPU asked for: none visible
    ("void", None, ""),
    ("all", None, "0,1,2,3"),
    ("2", None, "2"),                 # node index 2
    ("3,1", None, "1,3"),             # renumbered in PCI bus order
    ("3,1", "1", "3"),                # the pod's CUDA index is into its visible devices
    ("3,1", "1,0", "3,1"),
    ("1", "0", "1"),                  # pinned mode: NVIDIA_VISIBLE_DEVICES=1, CUDA_VISIBLE_DEVICES=0
    ("1", "1", ""),                   # index past the visible ones: CUDA stops there
    ("0,1", "1,7,0", "1"),
])
def test_runtime_translates_visible_devices_to_the_host(nvidia, cuda, host):
    assert gpus.host_cuda_visible_devices(nvidia, cuda, _devices()) == host


def test_runtime_accepts_uuids_and_refuses_unknown_devices():
    devices = _devices()
    assert gpus.host_cuda_visible_devices(devices[2].uuid, None, devices) == "2"
    assert gpus.host_cuda_visible_devices("1,2", devices[2].uuid, devices) == "2"
    with pytest.raises(gpus.DeviceError):
        gpus.host_cuda_visible_devices("9", None, devices)


def test_plugin_value_lists_each_uuid_once():
    devices = _devices((0, 1))
    assert gpus.visible_devices_value([devices[1], devices[1], devices[0]]) == f"{devices[1].uuid},{devices[0].uuid}"
