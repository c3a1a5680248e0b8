"""The CRD (and so the chart, whose copy is byte-equal) says what the contract says.

Aspects: API coordinates; the default port; the GPU modes; the host placements; the restart policies; the name-length and proc-count rules
that keep derived names valid.
"""

import pathlib

import yaml

from mesh_client._src import contract

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
VERSION = CRD["spec"]["versions"][0]
SPEC = VERSION["schema"]["openAPIV3Schema"]["properties"]["spec"]


def test_api_coordinates():
    names = CRD["spec"]["names"]
    assert (CRD["spec"]["group"], VERSION["name"]) == (contract.GROUP, contract.VERSION)
    assert (names["kind"], names["plural"]) == (contract.KIND, contract.PLURAL)
    assert CRD["metadata"]["name"] == f"{contract.PLURAL}.{contract.GROUP}"


def test_default_port():
    assert SPEC["properties"]["port"]["default"] == contract.PROC_PORT


def test_gpu_modes():
    mode = SPEC["properties"]["gpus"]["properties"]["mode"]
    assert tuple(mode["enum"]) == contract.GPU_MODES
    assert mode["default"] == contract.GPU_MODE_NONE


def test_host_placements():
    hosts = SPEC["properties"]["placement"]["properties"]["hosts"]
    assert tuple(hosts["enum"]) == contract.HOST_PLACEMENTS
    assert hosts["default"] == contract.HOSTS_ON_DISTINCT_NODES


def test_restart_policies():
    policy = SPEC["properties"]["restartPolicy"]
    assert tuple(policy["enum"]) == contract.RESTART_POLICIES
    assert policy["default"] == contract.DEFAULT_RESTART_POLICY
    assert SPEC["properties"]["maxRestarts"]["default"] == contract.DEFAULT_MAX_RESTARTS


def test_length_rules():
    rules = [r["rule"] for r in VERSION["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]]
    assert f"self.metadata.name.size() <= {contract.MAX_MESH_NAME}" in rules
    spec_rules = " ".join(r["rule"] for r in SPEC["x-kubernetes-validations"])
    assert f"<= {contract.MAX_PROCS}" in spec_rules
