"""The same GPU sharing through the operator: two ProcMeshes, policy and trainer, pinned to the
same devices with colocateWith, on a process node backed by this machine's real GPUs, driven
through the Kubernetes backend. Needs CUDA and the control-plane binaries (PROCMESH_CLUSTER_BIN_DIR
or the build cache); the CRD is applied through the API, so no kubectl is needed."""

import pathlib

import pytest
import yaml

from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import cluster, kube  # noqa: F401
from tests.gpu import sharing_checks as checks
from tests.gpu.gpu_actors import Role

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def roles(cluster, kube, device_ids, tmp_path_factory):  # noqa: F811
    from kubernetes import client

    from mesh_client.kubernetes import KubernetesHostMesh
    from tests.cluster import testing
    from tests.integration.operator.support import OperatorProcess

    crd = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
    ext = client.ApiextensionsV1Api(kube)
    try:
        ext.create_custom_resource_definition(crd)
    except client.ApiException as exc:
        if exc.status != 409:
            raise

    def established():
        obj = ext.read_custom_resource_definition("procmeshes.procmesh.io")
        return any(c.type == "Established" and c.status == "True" for c in obj.status.conditions or [])

    testing.wait_for(established, "the ProcMesh CRD is established")
    cluster.add_node(NodeConfig("gpu-host", gpus=len(device_ids), host_gpus=tuple(device_ids)))
    op = OperatorProcess(cluster, tmp_path_factory.mktemp("operator"))
    op.start()
    hosts = KubernetesHostMesh(hosts=1, namespace="default", api_client=kube, timeout=300)
    n = len(device_ids)
    policy_procs = hosts.spawn_procs(per_host={"gpus": n}, gpus=list(range(n)), memory_fraction=0.3, name="policy")
    trainer_procs = hosts.spawn_procs(
        per_host={"gpus": n}, gpus="pinned", memory_fraction=0.6, colocate_with=policy_procs, name="trainer"
    )
    try:
        yield trainer_procs, policy_procs.spawn("policy", Role), trainer_procs.spawn("trainer", Role)
    finally:
        trainer_procs.stop().get()
        policy_procs.stop().get()
        op.stop()


def test_each_proc_sees_exactly_its_device(roles, device_ids, smi_uuids):
    _, policy, trainer = roles
    # the node's device i is host GPU device_ids[i]; the meshes pin node devices 0..n-1
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
