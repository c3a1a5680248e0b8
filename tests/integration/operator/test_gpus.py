"""GPU modes on the process nodes (node-0: no GPUs; gpu-node: 2 emulated GPUs with GFD labels).

Aspects: pinned mode gives each proc exactly its device (env, and what the proc reports);
colocateWith puts matching procs on the same node and device; an over-committed device is
refused with a condition and a Warning event and no pods; devices missing on every node are
refused; plugin mode lands only on nodes with the resource.
"""

import pytest

from tests.integration.operator import support

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("devices_free")]

GPUS_2 = [{"name": "gpus", "size": 2}]


def test_pinned_pair_shares_devices(operator, namespace, custom, core, gpu_node):
    support.create_mesh(custom, namespace, "policy", perHost=GPUS_2,
                        gpus={"mode": "pinned", "deviceIDs": [1, 0], "memoryFraction": 0.4})
    support.create_mesh(custom, namespace, "trainer", perHost=GPUS_2, colocateWith="policy",
                        gpus={"mode": "pinned", "memoryFraction": 0.5})
    policy = support.wait_ready(custom, namespace, "policy")
    trainer = support.wait_ready(custom, namespace, "trainer")
    assert support.condition(trainer, "GPUBudgetSatisfied")["status"] == "True"
    token = support.token(core, namespace, "policy")
    for rank, device in ((0, "1"), (1, "0")):
        p, t = policy["status"]["procs"][rank], trainer["status"]["procs"][rank]
        assert p["node"] == t["node"] == gpu_node
        assert p["gpu"] == t["gpu"] == device
        pod = core.read_namespaced_pod(f"policy-{rank}", namespace)
        env = support.env_of(pod)
        assert env["NVIDIA_VISIBLE_DEVICES"] == device and env["CUDA_VISIBLE_DEVICES"] == "0"
        assert env["PROCMESH_MEMORY_FRACTION"] == "0.4"
        assert not (pod.spec.containers[0].resources.limits or {})  # no GPU request
        # What the proc itself sees (the process node applies the NVIDIA runtime's rules).
        assert support.identify(p["address"], token)["gpu"] == device


def test_overcommitted_device_is_refused(operator, namespace, custom, core, gpu_node):
    support.create_mesh(custom, namespace, "big", perHost=GPUS_2,
                        gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.7})
    support.wait_ready(custom, namespace, "big")
    support.create_mesh(custom, namespace, "greedy", perHost=GPUS_2, colocateWith="big",
                        gpus={"mode": "pinned", "memoryFraction": 0.5})
    mesh = support.wait_condition(custom, namespace, "greedy", "GPUBudgetSatisfied", "False",
                                  "GPUBudgetExceeded")
    message = support.condition(mesh, "GPUBudgetSatisfied")["message"]
    assert "big-0=0.7" in message and "greedy-0=0.5" in message
    assert support.condition(mesh, "Ready")["status"] == "False"
    assert mesh["status"]["phase"] == "Waiting"  # room may free: not Failed
    assert support.mesh_pods(core, namespace, "greedy") == []
    warnings = [e for e in support.events(core, namespace, "greedy") if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["GPUBudgetExceeded"]


def test_missing_device_is_refused(operator, namespace, custom, core, gpu_node):
    support.create_mesh(custom, namespace, "far", perHost=GPUS_2,
                        gpus={"mode": "pinned", "deviceIDs": [0, 5]})
    mesh = support.wait_condition(custom, namespace, "far", "GPUBudgetSatisfied", "False",
                                  "NoNodeFits")
    assert "GPU 5 does not exist on node gpu-node" in \
        support.condition(mesh, "GPUBudgetSatisfied")["message"]
    assert support.mesh_pods(core, namespace, "far") == []


def test_colocated_cpu_meshes_share_nodes(operator, namespace, custom, core, gpu_node):
    support.create_mesh(custom, namespace, "lead", perHost=[{"name": "procs", "size": 3}])
    support.create_mesh(custom, namespace, "follow", perHost=[{"name": "procs", "size": 3}],
                        colocateWith="lead")
    lead = support.wait_ready(custom, namespace, "lead")
    follow = support.wait_ready(custom, namespace, "follow")
    assert [p["node"] for p in lead["status"]["procs"]] == \
        [p["node"] for p in follow["status"]["procs"]]


def test_colocation_with_missing_mesh_is_reported(operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "orphan", colocateWith="nobody")
    mesh = support.wait_condition(custom, namespace, "orphan", "Ready", "False",
                                  "InvalidColocation")
    assert "ProcMesh nobody, which does not exist" in support.condition(mesh, "Ready")["message"]
    assert mesh["status"]["phase"] == "Waiting"  # placed once nobody is created: not Failed
    assert support.mesh_pods(core, namespace, "orphan") == []


def test_plugin_mode_lands_on_gpu_nodes_only(operator, namespace, custom, core, gpu_node):
    support.create_mesh(custom, namespace, "plug", perHost=[{"name": "gpus", "size": 2}],
                        gpus={"mode": "plugin", "memoryFraction": 0.3})
    mesh = support.wait_ready(custom, namespace, "plug")
    assert {p["node"] for p in mesh["status"]["procs"]} == {gpu_node}
    for pod in support.mesh_pods(core, namespace, "plug"):
        assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
        assert "NVIDIA_VISIBLE_DEVICES" not in support.env_of(pod)
    # The device plugin's choice is not in the pod object, and the operator never asks the
    # proc (it holds no token): no GPU in status; the client can ask its proc.
    token = support.token(core, namespace, "plug")
    for proc in mesh["status"]["procs"]:
        assert "gpu" not in proc
        assert support.identify(proc["address"], token)["gpu"]
