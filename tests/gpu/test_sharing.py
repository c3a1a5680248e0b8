"""Two roles share GPUs on real hardware, through the local backend and through the operator.

Aspects, for each backend: each proc sees exactly its listed device (torch's UUID equals
nvidia-smi's for the index); a role that allocates past its memory fraction gets an
out-of-memory ActorError from its own process while the other role keeps running; taking turns,
with cached memory released between turns; a co-located actor's memory shows in its proc.

The operator variants run the local control plane (binaries from PROCMESH_CLUSTER_BIN_DIR or the
build cache), a process node backed by this machine's GPUs and the operator; the two roles are
ProcMeshes with colocateWith, driven through the Kubernetes backend: pinned to the same devices
(operator-pinned), or sharing the policy's ResourceClaims, whose devices the kube-scheduler's DRA
allocator picks from the node's ResourceSlice (operator-dra: torch's UUID in each proc equals
the UUID the operator reports from the claim's allocation).
The CRD is applied through the API (tests/integration/operator/support.install_crd), so no
kubectl is needed.
"""

import pathlib
from functools import partial

import pytest
import torch

from mesh_client import this_host
from tests.cluster.pytest_plugin import cluster, kube  # noqa: F401
from tests.gpu import sharing_checks as checks
from tests.gpu.gpu_actors import Role, on_gpus

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pinned_uuid(device_ids, smi_uuids):
    """Where a role's proc at ``point`` must be: the device listed for its local index."""
    return lambda role, point: smi_uuids[device_ids[point["gpus"]]]


def local_roles(device_ids, request):
    n = len(device_ids)
    meshes = [
        this_host().spawn_procs(
            per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
            bootstrap=partial(torch.cuda.set_per_process_memory_fraction, fraction), name=name,
        )
        for name, fraction in (("policy", 0.3), ("trainer", 0.6))
    ]
    return meshes, lambda: None, pinned_uuid(device_ids, request.getfixturevalue("smi_uuids"))


def _operator_roles(device_ids, request, mode):
    from mesh_client.kubernetes import KubernetesHostMesh
    from tests.cluster.process_node.config import NodeConfig
    from tests.integration.operator import support

    cluster_, kube_ = request.getfixturevalue("cluster"), request.getfixturevalue("kube")
    support.install_crd(cluster_.kubeconfig)
    # the node's device i is host GPU device_ids[i]; the meshes pin node devices 0..n-1 (dra:
    # the node publishes them, with their real UUIDs, as the NVIDIA DRA driver's ResourceSlice)
    cluster_.add_node(NodeConfig(f"gpu-host-{mode}", gpus=len(device_ids), host_gpus=tuple(device_ids),
                                 dra=mode == "dra"))
    op = support.OperatorProcess(cluster_.kubeconfig, request.getfixturevalue("tmp_path_factory").mktemp("operator"))
    op.start()
    hosts = KubernetesHostMesh(hosts=1, namespace="default", api_client=kube_, timeout=300)
    n = len(device_ids)
    policy = hosts.spawn_procs(per_host={"gpus": n}, gpus=list(range(n)) if mode == "pinned" else "dra",
                               memory_fraction=0.3, name=f"policy-{mode}")
    trainer = hosts.spawn_procs(per_host={"gpus": n}, gpus=mode, memory_fraction=0.6, colocate_with=policy,
                                name=f"trainer-{mode}")
    if mode == "pinned":
        expected = pinned_uuid(device_ids, request.getfixturevalue("smi_uuids"))
    else:
        from kubernetes import client

        def expected(role, point):
            # dra: the scheduler chose; the proc must see its claim's device, as status reports it
            mesh = client.CustomObjectsApi(kube_).get_namespaced_custom_object(
                "procmesh.io", "v1alpha1", "default", "procmeshes", f"policy-{mode}")
            return mesh["status"]["procs"][point["gpus"]]["gpu"]
    return [policy, trainer], op.stop, expected


def operator_pinned_roles(device_ids, request):
    return _operator_roles(device_ids, request, "pinned")


def operator_dra_roles(device_ids, request):
    return _operator_roles(device_ids, request, "dra")


@pytest.fixture(scope="module", params=[local_roles, operator_pinned_roles, operator_dra_roles],
                ids=["local", "operator-pinned", "operator-dra"])
def roles(request, device_ids):
    (policy_procs, trainer_procs), teardown, expected = request.param(device_ids, request)
    try:
        yield (trainer_procs, policy_procs.spawn("policy", Role), trainer_procs.spawn("trainer", Role),
               expected)
    finally:
        trainer_procs.stop().get()
        policy_procs.stop().get()
        teardown()


def test_each_proc_sees_exactly_its_device(roles):
    _, policy, trainer, expected = roles
    checks.each_proc_sees_exactly_its_device(policy, trainer, expected)


def test_over_the_cap_is_an_oom_in_that_role_only(roles):
    _, policy, trainer, _ = roles
    checks.over_the_cap_is_an_oom_in_that_role_only(policy, trainer)


def test_taking_turns_releases_cached_memory(roles):
    _, policy, trainer, _ = roles
    checks.taking_turns_releases_cached_memory(policy, trainer)


def test_colocated_actor_memory_shows_in_its_proc(roles):
    trainer_procs, _, trainer, _ = roles
    checks.colocated_actor_memory_shows_in_its_proc(trainer_procs, trainer)
