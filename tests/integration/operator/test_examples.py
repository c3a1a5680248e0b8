"""`kubectl apply -f examples/meshes/` works and every example mesh becomes Ready; the README's
NetworkPolicy example selects its mesh's pods."""

import pathlib

import pytest
import yaml
from kubernetes import client

from tests.integration.operator import support

pytestmark = pytest.mark.cluster


def test_examples_apply_and_become_ready(cluster, operator, dra_node, devices_free, namespace,
                                        custom):
    folder = support.ROOT / "examples" / "meshes"
    support.kubectl(cluster, "apply", "-n", namespace, "-f", str(folder))
    names = [doc["metadata"]["name"] for path in sorted(pathlib.Path(folder).glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text())]
    assert {"cpu-mesh", "policy", "trainer", "plugin-mesh", "dra-policy", "dra-trainer"} <= set(names)
    for name in names:
        mesh = support.wait_ready(custom, namespace, name)
        assert mesh["status"]["readyProcs"] == mesh["status"]["desiredProcs"]


def test_the_network_policy_example_selects_its_mesh_pods(cluster, operator, namespace, custom,
                                                          core):
    """The README's NetworkPolicy is valid (kubectl's strict field validation) and selects by the
    label the operator puts on proc pods: its ``podSelector`` and its first peer are the mesh's
    pods, exactly."""
    root = support.ROOT / "examples"
    support.kubectl(cluster, "apply", "-n", namespace, "-f", str(root / "meshes" / "cpu-mesh.yaml"),
                    "-f", str(root / "network-policy.yaml"))
    support.wait_ready(custom, namespace, "cpu-mesh")
    policy = yaml.safe_load((root / "network-policy.yaml").read_text())
    stored = client.NetworkingV1Api(core.api_client).read_namespaced_network_policy(
        policy["metadata"]["name"], namespace)

    def selected(match_labels: dict[str, str]) -> set[str]:
        selector = ",".join(f"{k}={v}" for k, v in match_labels.items())
        return {p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=selector).items}

    mesh_pods = {p.metadata.name for p in support.mesh_pods(core, namespace, "cpu-mesh")}
    assert len(mesh_pods) == 8
    assert selected(stored.spec.pod_selector.match_labels) == mesh_pods
    assert selected(stored.spec.ingress[0]._from[0].pod_selector.match_labels) == mesh_pods
