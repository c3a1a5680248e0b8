"""A client newer than the cluster's ProcMesh CRD: ``spawn_procs()`` without ``per_host`` on a
cluster whose chart predates meshes without perHost (its CRD requires one perHost dimension, as
before 2026-12-07), against a control plane of its own with that CRD.

Aspects: the refusal says what the program asked for and what to do (upgrade the chart, or pass
``per_host={'procs': 1}``), not only the API server's words about spec.perHost.
"""

import copy

import pytest
import yaml

from mesh_client.kubernetes import KubernetesHostMesh, KubernetesMeshError
from tests.cluster import binaries, testing
from tests.cluster.process_node.config import NodeConfig
from tests.cluster.pytest_plugin import admin_client, started_cluster
from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def earlier_crd() -> dict:
    """crds/procmesh.yaml as charts before 2026-12-07 had it: perHost required, one item at least."""
    crd = yaml.safe_load((support.ROOT / "crds" / "procmesh.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["required"] = ["perHost"]
    per_host = spec["properties"]["perHost"]
    per_host.pop("default")
    per_host["minItems"] = 1
    return crd


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Overrides the session cluster for this module: one whose ProcMesh CRD is the earlier one."""
    with started_cluster(tmp_path_factory.mktemp("older-crd"), NodeConfig("node-0"), binaries.CONTROL_PLANE,
                         gang=False) as instance:
        yield instance


@pytest.fixture(scope="module")
def kube(cluster):
    from kubernetes import client

    with admin_client(cluster) as api_client:
        ext = client.ApiextensionsV1Api(api_client)
        ext.create_custom_resource_definition(copy.deepcopy(earlier_crd()))

        def established() -> bool:
            conditions = ext.read_custom_resource_definition(support.CRD_NAME).status.conditions or []
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        testing.wait_for(established, "the earlier ProcMesh CRD Established")
        yield api_client


def test_spawn_procs_without_per_host_says_the_crd_is_older(kube, namespace):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=60)
    with pytest.raises(KubernetesMeshError) as info:
        hosts.spawn_procs(name="solo")
    said = str(info.value)
    assert "spec.perHost" in said  # the API server's own words stay
    assert "older than meshes without perHost" in said and "upgrade the chart" in said, said
    assert "per_host={'procs': 1}" in said, said

