"""GPU modes on the process nodes (node-0: no GPUs; gpu-node: 2 emulated GPUs with GFD labels).

Aspects: pinned mode gives each proc exactly its device (env, and what the proc reports);
colocateWith puts matching procs on the same node and device; a device its mesh and partner
over-commit is refused with a condition and a Warning event and no pods; a device other meshes'
procs fill is waited for (phase Waiting, the client waits too) and the mesh placed as soon as
their pods are gone (not while they terminate), with no resync to help; devices missing on every node are refused; a cycle of three
colocated meshes is refused; plugin mode lands only on nodes with the resource.
"""

import threading

import pytest

from mesh_client._src import contract
from mesh_client.kubernetes import MeshNotReady, attach
from tests.cluster import testing
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
    assert "create it again with a lower spec.gpus.memoryFraction" in message
    assert support.condition(mesh, "Ready")["status"] == "False"
    # Its partner's procs stay as long as it does: no room frees, so this is no wait.
    assert support.condition(mesh, "Progressing")["status"] == "False"
    assert mesh["status"]["phase"] == "Failed"
    assert support.mesh_pods(core, namespace, "greedy") == []
    warnings = [e for e in support.events(core, namespace, "greedy") if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["GPUBudgetExceeded"]


@pytest.fixture
def eventful_operator(operator):
    """The session operator, restarted without resync and without gang placement (whose own
    wake-ups would hide a missing one) for this test, restored afterwards: only the events of a
    waiting mesh's kind can bring it on."""
    with support.session_operator_with(operator, "--resync-seconds", "3600",
                                       "--gang", "off") as restarted:
        yield restarted


def test_a_device_other_meshes_fill_is_waited_for_and_taken_when_they_end(
        eventful_operator, namespace, custom, core, kube, gpu_node):
    support.create_mesh(custom, namespace, "first", perHost=GPUS_2,
                        gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.7})
    support.wait_ready(custom, namespace, "first")
    support.create_mesh(custom, namespace, "second", perHost=GPUS_2,
                        gpus={"mode": "pinned", "deviceIDs": [0, 1], "memoryFraction": 0.5})
    mesh = support.wait_condition(custom, namespace, "second", "Progressing", "True",
                                  contract.WAITING_FOR_GPU_BUDGET)
    assert mesh["status"]["phase"] == "Waiting"
    assert "first-0=0.7" in support.condition(mesh, "Ready")["message"]
    assert support.mesh_pods(core, namespace, "second") == []
    # The client waits too: it stops at its timeout, with the operator's reason, not at once.
    with pytest.raises(MeshNotReady) as info:
        attach("second", namespace, api_client=kube, timeout=3, progress=False)
    assert info.value.reason == contract.WAITING_FOR_GPU_BUDGET
    assert "was not Ready after 3 s" in str(info.value) and "first-0=0.7" in str(info.value)
    attached: list[object] = []
    waiter = threading.Thread(target=lambda: attached.append(
        attach("second", namespace, api_client=kube, timeout=testing.WAIT_SECONDS,
               progress=False)))
    waiter.start()
    custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                           contract.PLURAL, "first")
    # While first's pods terminate, their procs still hold the GPUs' memory: second waits until
    # they are gone (a check of order, at every poll, not of time).
    beside: list[str] = []

    def first_gone() -> bool:
        second_pods = support.mesh_pods(core, namespace, "second")  # listed first: then both
        first_pods = support.mesh_pods(core, namespace, "first")    # lists show them together
        if first_pods and second_pods:
            beside.extend(p.metadata.name for p in first_pods)
        return not first_pods

    testing.wait_for(first_gone, "first's pods gone")
    assert not beside, f"second was placed while {beside} still terminated on its GPUs"
    # No resync runs: the end of first's procs is what places second.
    waiter.join()
    assert attached, "attach raised (see the thread's traceback above)"
    mesh = support.get_mesh(custom, namespace, "second")
    assert mesh["status"]["phase"] == "Ready"
    assert [p["gpu"] for p in mesh["status"]["procs"]] == ["0", "1"]


def test_a_cycle_of_three_colocated_meshes_is_refused(operator, namespace, custom, core):
    for name, partner in (("a", "b"), ("b", "c"), ("c", "a")):
        support.create_mesh(custom, namespace, name, colocateWith=partner)
    for name, cycle in (("a", "a -> b -> c -> a"), ("b", "b -> c -> a -> b"),
                        ("c", "c -> a -> b -> c")):
        mesh = support.wait_condition(custom, namespace, name, "Ready", "False",
                                      contract.INVALID_COLOCATION)
        assert cycle in support.condition(mesh, "Ready")["message"]
        assert mesh["status"]["phase"] == "Failed"
    support.create_mesh(custom, namespace, "x", colocateWith="a")  # leads into the cycle
    mesh = support.wait_condition(custom, namespace, "x", "Ready", "False",
                                  contract.INVALID_COLOCATION)
    assert "neither can this mesh" in support.condition(mesh, "Ready")["message"]
    for name in "abcx":
        assert support.mesh_pods(core, namespace, name) == []


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
                                  contract.WAITING_FOR_COLOCATED)
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
