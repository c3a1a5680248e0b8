"""Two roles share GPUs on real hardware, through the local backend and through the operator.

Aspects, for each backend: each proc sees exactly its listed device (torch's UUID equals
nvidia-smi's for the index); a role that allocates past its memory fraction gets an
out-of-memory ActorError from its own process while the other role keeps running; taking turns,
with cached memory released between turns; a co-located actor's memory shows in its proc.

The operator variant runs the local control plane (binaries from PROCMESH_CLUSTER_BIN_DIR or the
build cache), a process node backed by this machine's GPUs and the operator; the two roles are
ProcMeshes pinned to the same devices with colocateWith, driven through the Kubernetes backend.
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


def local_roles(device_ids, request):
    n = len(device_ids)
    meshes = [
        this_host().spawn_procs(
            per_host={"gpus": n}, bootstrap_command=on_gpus(device_ids),
            bootstrap=partial(torch.cuda.set_per_process_memory_fraction, fraction), name=name,
        )
        for name, fraction in (("policy", 0.3), ("trainer", 0.6))
    ]
    return meshes, lambda: None


def operator_roles(device_ids, request):
    from mesh_client.kubernetes import KubernetesHostMesh
    from tests.cluster.process_node.config import NodeConfig
    from tests.integration.operator import support

    cluster_, kube_ = request.getfixturevalue("cluster"), request.getfixturevalue("kube")
    support.install_crd(cluster_.kubeconfig)
    # the node's device i is host GPU device_ids[i]; the meshes pin node devices 0..n-1
    cluster_.add_node(NodeConfig("gpu-host", gpus=len(device_ids), host_gpus=tuple(device_ids)))
    op = support.OperatorProcess(cluster_.kubeconfig, request.getfixturevalue("tmp_path_factory").mktemp("operator"))
    op.start()
    hosts = KubernetesHostMesh(hosts=1, namespace="default", api_client=kube_, timeout=300)
    n = len(device_ids)
    policy = hosts.spawn_procs(per_host={"gpus": n}, gpus=list(range(n)), memory_fraction=0.3, name="policy")
    trainer = hosts.spawn_procs(per_host={"gpus": n}, gpus="pinned", memory_fraction=0.6, colocate_with=policy, name="trainer")
    return [policy, trainer], op.stop


@pytest.fixture(scope="module", params=[local_roles, operator_roles], ids=["local", "operator"])
def roles(request, device_ids):
    (policy_procs, trainer_procs), teardown = request.param(device_ids, request)
    try:
        yield trainer_procs, policy_procs.spawn("policy", Role), trainer_procs.spawn("trainer", Role)
    finally:
        trainer_procs.stop().get()
        policy_procs.stop().get()
        teardown()


def test_each_proc_sees_exactly_its_device(roles, device_ids, smi_uuids):
    _, policy, trainer = roles
    checks.each_proc_sees_exactly_its_device(policy, trainer, device_ids, smi_uuids)


def test_over_the_cap_is_an_oom_in_that_role_only(roles):
    _, policy, trainer = roles
    checks.over_the_cap_is_an_oom_in_that_role_only(policy, trainer)


def test_taking_turns_releases_cached_memory(roles):
    _, policy, trainer = roles
    checks.taking_turns_releases_cached_memory(policy, trainer)


def test_colocated_actor_memory_shows_in_its_proc(roles):
    trainer_procs, _, trainer = roles
    checks.colocated_actor_memory_shows_in_its_proc(trainer_procs, trainer)
