"""`kubectl apply -f examples/meshes/` works and every example mesh becomes Ready."""

import pathlib

import pytest
import yaml

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
