"""The CRD teaches itself: every field described, the status subresource, printer columns,
immutability and cross-field rules present, examples shaped like the schema."""

import pathlib

import yaml

from mesh_client._src import contract

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]


def walk(schema, path):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def test_short_name():
    # Group, version, kind and plural: tests/unit/contract/test_crd_agrees.py.
    assert CRD["spec"]["names"]["shortNames"] == [contract.SHORT_NAME]


def test_every_spec_and_status_field_is_described():
    missing = [path for top in ("spec", "status")
               for path, s in walk(SCHEMA["properties"][top], top)
               if not s.get("description") and not path.endswith("{}")
               and not path.endswith("[]")]
    assert missing == []


def test_status_subresource_and_columns():
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert columns["Ready"] == ".status.readyProcs"
    assert columns["Desired"] == ".status.desiredProcs"
    assert columns["Phase"] == ".status.phase"
    # Ready False alone says nothing: the reason beside it, the message with -o wide.
    assert columns["Reason"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert columns["Message"] == '.status.conditions[?(@.type=="Ready")].message'
    assert [c.get("priority", 0) for c in VERSION["additionalPrinterColumns"] if c["name"] in ("Reason", "Message")] == [0, 1]
    assert columns["Restarts"] == ".status.restarts"
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_immutable_fields_have_transition_rules():
    spec = SCHEMA["properties"]["spec"]
    for field in ("hosts", "gpus", "port"):
        rules = [r["rule"] for r in spec["properties"][field].get("x-kubernetes-validations", [])]
        assert "self == oldSelf" in rules, field
    # perHost is a list-type map, whose CEL equality ignores order: its names are compared as
    # a plain list as well, so that reordered dimensions are refused.
    rules = [r["rule"] for r in spec["properties"]["perHost"]["x-kubernetes-validations"]]
    assert "self == oldSelf && self.map(d, d.name) == oldSelf.map(d, d.name)" in rules
    assert any("oldSelf.colocateWith" in r["rule"] for r in spec["x-kubernetes-validations"])


def test_every_refused_change_says_what_to_do():
    """A change the transition rules refuse names the way to make it (kubectl apply prints
    only the message); "port is immutable" alone left the user guessing."""
    transition = [(path, r) for path, s in walk(SCHEMA, "") for r in
                  s.get("x-kubernetes-validations") or [] if "oldSelf" in r["rule"]]
    assert len(transition) >= 7
    for path, rule in transition:
        assert "delete and recreate the mesh" in " ".join(rule["message"].split()), path


def test_memory_fraction_bounds():
    fraction = SCHEMA["properties"]["spec"]["properties"]["gpus"]["properties"]["memoryFraction"]
    assert (fraction["minimum"], fraction["exclusiveMinimum"], fraction["maximum"]) == (0, True, 1)


def test_examples_parse_and_use_known_fields():
    spec_props = SCHEMA["properties"]["spec"]["properties"]
    files = sorted((ROOT / "examples" / "meshes").glob("*.yaml"))
    assert len(files) >= 3
    kinds = set()
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["apiVersion"] == "procmesh.io/v1alpha1" and doc["kind"] == "ProcMesh"
            assert set(doc["spec"]) <= set(spec_props), path
            kinds.add((doc["spec"].get("gpus") or {}).get("mode", "none"))
            if doc["spec"].get("colocateWith"):
                kinds.add("colocated")
    assert kinds >= {"none", "plugin", "pinned", "colocated"}


def test_plugin_rule_defaults_to_the_operators_gpu_resource():
    # The plugin-mode rule on template.resources spells out the default of gpus.resourceName.
    from procmesh_operator import settings

    rules = " ".join(r["rule"] for r in SCHEMA["properties"]["spec"]["x-kubernetes-validations"])
    assert f"self.gpus.resourceName : '{settings.DEFAULT_GPU_RESOURCE}'" in rules
