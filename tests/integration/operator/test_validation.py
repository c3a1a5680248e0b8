"""Every validation rule of the CRD: `kubectl apply` refuses a bad manifest with a clear message
and creates nothing. Plus the immutability rules on update."""

import json

import pytest

from tests.integration.operator import support

pytestmark = pytest.mark.cluster

GPUS_2 = [{"name": "gpus", "size": 2}]
DRA_GPUS = {"mode": "dra", "deviceClassName": "gpu.nvidia.com"}

BAD = [
    ("name-too-long", {"name": "m" * 53}, {}, "at most 52 characters"),
    ("not-dns-1035", {"name": "9lives"}, {}, "DNS-1035 label"),
    ("zero-hosts", {}, {"hosts": 0}, "should be greater than or equal to 1"),
    ("zero-size", {}, {"perHost": [{"name": "gpus", "size": 0}]},
     "should be greater than or equal to 1"),
    ("hosts-alone-two-ids", {}, {"perHost": [], "gpus": {"mode": "pinned", "deviceIDs": [0, 1]}},
     "one entry per point of the local (last perHost)"),
    ("reserved-dim", {}, {"perHost": [{"name": "hosts", "size": 2}]}, "is reserved"),
    ("dup-dim", {}, {"perHost": [{"name": "a", "size": 2}, {"name": "a", "size": 1}]},
     "Duplicate value"),
    ("too-many-procs", {}, {"hosts": 1000, "perHost": [{"name": "g", "size": 20}]},
     "at most 10000 procs"),
    ("pinned-no-ids", {}, {"perHost": GPUS_2, "gpus": {"mode": "pinned"}},
     "gpus.deviceIDs is required in pinned mode"),
    ("ids-wrong-length", {}, {"perHost": GPUS_2, "gpus": {"mode": "pinned", "deviceIDs": [0]}},
     "one entry per point of the local (last perHost)"),
    ("ids-duplicate", {}, {"perHost": GPUS_2, "gpus": {"mode": "pinned", "deviceIDs": [1, 1]}},
     "must not list a device twice"),
    ("ids-bad", {}, {"perHost": GPUS_2, "gpus": {"mode": "pinned", "deviceIDs": [0, "x"]}},
     "device indices"),
    ("ids-not-pinned", {}, {"perHost": GPUS_2, "gpus": {"mode": "plugin", "deviceIDs": [0, 1]}},
     "only valid with gpus.mode pinned"),
    ("fraction-zero", {}, {"perHost": GPUS_2, "gpus": {"mode": "plugin", "memoryFraction": 0}},
     "should be greater than 0"),
    ("fraction-above-one", {}, {"perHost": GPUS_2,
                                "gpus": {"mode": "plugin", "memoryFraction": 1.5}},
     "should be less than or equal to 1"),
    ("fraction-no-gpu", {}, {"perHost": GPUS_2, "gpus": {"memoryFraction": 0.5}},
     "needs gpus.mode plugin, pinned or dra"),
    ("resource-not-plugin", {}, {"perHost": GPUS_2,
                                 "gpus": {"mode": "none", "resourceName": "nvidia.com/gpu"}},
     "only valid with gpus.mode plugin"),
    ("bad-mode", {}, {"perHost": GPUS_2, "gpus": {"mode": "mps"}}, "Unsupported value"),
    ("bad-policy", {}, {"perHost": GPUS_2, "restartPolicy": "Always"}, "Unsupported value"),
    ("colocate-self", {"name": "selfish"}, {"perHost": GPUS_2, "colocateWith": "selfish"},
     "must name another ProcMesh"),
    ("reserved-env", {}, {"perHost": GPUS_2, "template": {"env": [
        {"name": "PROCMESH_RANK", "value": "3"}]}}, "set by the operator"),
    ("reserved-label", {}, {"perHost": GPUS_2, "template": {"labels": {
        "procmesh.io/mesh": "x"}}}, "set by the operator"),
    ("low-port", {}, {"perHost": GPUS_2, "port": 80}, "greater than or equal to 1024"),
    ("bad-token-secret", {}, {"perHost": GPUS_2, "tokenSecretName": "Not_A_Name"},
     "spec.tokenSecretName in body should match"),
    ("bad-automount", {}, {"perHost": GPUS_2, "template": {"automountServiceAccountToken": "yes"}},
     "automountServiceAccountToken: Invalid value"),
    # dra mode (issue 11):
    ("dra-no-class", {}, {"perHost": GPUS_2, "gpus": {"mode": "dra"}},
     "gpus.deviceClassName is required in dra mode"),
    ("dra-empty-class", {}, {"perHost": GPUS_2, "gpus": {"mode": "dra", "deviceClassName": ""}},
     "should be at least 1 chars long"),
    ("dra-index-ids", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "dra", "deviceClassName": "gpu.nvidia.com", "deviceIDs": [0, 1]}},
     "in dra mode gpus.deviceIDs must be GPU or MIG UUIDs"),
    ("selectors-not-dra", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "pinned", "deviceIDs": [0, 1], "selectors": ["true"]}},
     "only valid with gpus.mode dra"),
    ("class-not-dra", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "plugin", "deviceClassName": "gpu.nvidia.com"}}, "only valid with gpus.mode dra"),
    ("dra-bad-sharing", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "dra", "deviceClassName": "gpu.nvidia.com", "sharing": {"strategy": "Spatial"}}},
     "Unsupported value"),
    ("dra-interval-mps", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "dra", "deviceClassName": "gpu.nvidia.com",
        "sharing": {"strategy": "MPS", "interval": "Long"}}},
     "interval is only valid with strategy TimeSlicing"),
    ("dra-too-many-requests", {}, {"perHost": [{"name": "gpus", "size": 33}], "gpus": DRA_GPUS},
     "a claim has at most 32 requests"),
    ("dra-colocated-own-claims", {}, {"perHost": GPUS_2, "colocateWith": "other", "gpus": {
        "mode": "dra", "deviceClassName": "gpu.nvidia.com"}},
     "uses its partner's ResourceClaims"),
    # template contents the Pod API would refuse only when the operator creates the pods:
    ("env-empty-name", {}, {"perHost": GPUS_2, "template": {"env": [{"name": "", "value": "x"}]}},
     "spec.template.env[0].name in body should be at least 1 chars long"),
    ("env-name-equals", {}, {"perHost": GPUS_2, "template": {"env": [{"name": "A=B"}]}},
     "template.env[].name must be printable ASCII without '='"),
    ("env-int-value", {}, {"perHost": GPUS_2, "template": {"env": [{"name": "A", "value": 3}]}},
     "spec.template.env[0].value: Invalid value: \"integer\""),
    ("env-value-and-from", {}, {"perHost": GPUS_2, "template": {"env": [
        {"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}},
     "template.env[] sets value or valueFrom, not both"),
    ("bad-quantity", {}, {"perHost": GPUS_2, "template": {"resources": {
        "requests": {"cpu": "lots"}}}}, "is not a Kubernetes quantity"),
    ("negative-quantity", {}, {"perHost": GPUS_2, "template": {"resources": {
        "limits": {"memory": "-1Gi"}}}}, "is not a Kubernetes quantity"),
    ("request-above-limit", {}, {"perHost": GPUS_2, "template": {"resources": {
        "requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}},
     "template.resources.requests must not exceed template.resources.limits"),
    ("label-bad-key", {}, {"perHost": GPUS_2, "template": {"labels": {"bad key": "v"}}},
     "template.labels keys must be label keys"),
    ("label-bad-value", {}, {"perHost": GPUS_2, "template": {"labels": {"x": "bad value!"}}},
     "must be a label value"),
    ("annotation-bad-key", {}, {"perHost": GPUS_2, "template": {"annotations": {"bad key!": "v"}}},
     "template.annotations keys must be"),
    ("node-selector-bad-value", {}, {"perHost": GPUS_2, "template": {"nodeSelector": {
        "k": "bad value!"}}}, "must be a label value"),
    ("node-selector-bad-key", {}, {"perHost": GPUS_2, "template": {"nodeSelector": {
        "a/b/c": "v"}}}, "template.nodeSelector keys must be label keys"),
    ("toleration-operator", {}, {"perHost": GPUS_2, "template": {"tolerations": [
        {"operator": "Sometimes"}]}},
     "spec.template.tolerations[0].operator: Unsupported value: \"Sometimes\""),
    ("toleration-exists-value", {}, {"perHost": GPUS_2, "template": {"tolerations": [
        {"key": "k", "operator": "Exists", "value": "v"}]}},
     "a toleration with operator Exists has no value"),
    ("node-affinity-operator", {}, {"perHost": GPUS_2, "template": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}]}}}}},
     "matchExpressions[0].operator: Unsupported value: \"Bogus\""),
    ("bad-service-account", {}, {"perHost": GPUS_2, "template": {"serviceAccountName": "Bad_SA"}},
     "template.serviceAccountName must be a DNS-1123 subdomain"),
    ("image-whitespace", {}, {"perHost": GPUS_2, "template": {"image": " proc:1"}},
     "template.image must not contain whitespace"),
    ("seccomp-no-file", {}, {"perHost": GPUS_2, "template": {
        "securityContext": {"seccompProfile": {"type": "Localhost"}}}},
     "localhostProfile is required with type Localhost, and only with it"),
    ("privileged-no-escalation", {}, {"perHost": GPUS_2, "template": {
        "containerSecurityContext": {"privileged": True, "allowPrivilegeEscalation": False}}},
     "privileged true with allowPrivilegeEscalation"),
    ("root-uid-typo", {}, {"perHost": GPUS_2, "template": {"securityContext": {"runAsUser": -1}}},
     "runAsUser: Invalid value: -1"),
    # GPU settings that conflict with the mode:
    ("pinned-gpu-limit", {}, {"perHost": GPUS_2, "gpus": {"mode": "pinned", "deviceIDs": [0, 1]},
                              "template": {"resources": {"limits": {"nvidia.com/gpu": 1}}}},
     "in pinned and dra mode the proc's GPU is not a device plugin resource"),
    ("dra-gpu-request", {}, {"perHost": GPUS_2, "gpus": DRA_GPUS, "template": {"resources": {
        "requests": {"nvidia.com/mig-1g.10gb": "1"}}}},
     "in pinned and dra mode the proc's GPU is not a device plugin resource"),
    ("plugin-shared-two", {}, {"perHost": GPUS_2, "gpus": {
        "mode": "plugin", "resourceName": "nvidia.com/gpu.shared"},
        "template": {"resources": {"requests": {"nvidia.com/gpu.shared": "2"}}}},
     "in plugin mode each proc gets exactly one unit of gpus.resourceName"),
    ("plugin-two-gpus", {}, {"perHost": GPUS_2, "gpus": {"mode": "plugin"},
                             "template": {"resources": {"limits": {"nvidia.com/gpu": 2}}}},
     "in plugin mode each proc gets exactly one unit of gpus.resourceName"),
    ("plugin-resource-cpu", {}, {"perHost": GPUS_2, "gpus": {"mode": "plugin",
                                                             "resourceName": "cpu"}},
     "gpus.resourceName must be an extended resource name with a domain"),
]


@pytest.mark.parametrize("case,meta,spec,message", BAD, ids=[b[0] for b in BAD])
def test_bad_manifest_is_refused(cluster, crd, namespace, case, meta, spec, message):
    manifest = {"apiVersion": "procmesh.io/v1alpha1", "kind": "ProcMesh",
                "metadata": {"name": meta.get("name", case)},
                "spec": {"perHost": [{"name": "procs", "size": 1}], **spec}}
    result = support.kubectl(cluster, "apply", "-n", namespace, "-f", "-",
                             input=json.dumps(manifest), check=False)
    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr
    listed = support.kubectl(cluster, "get", "pm", "-n", namespace, "-o", "name").stdout
    assert listed.strip() == ""


@pytest.mark.parametrize("per_host", [[], None], ids=["empty", "left-out"])
@pytest.mark.parametrize("gpus", [None, {"mode": "pinned", "deviceIDs": [0]}, DRA_GPUS], ids=["none", "pinned", "dra"])
def test_a_mesh_of_hosts_alone_is_accepted(cluster, crd, namespace, per_host, gpus):
    """``perHost: []`` or no perHost at all is one proc per host (Monarch's ``spawn_procs()``),
    pinned to one device; stored as ``perHost: []``, so its immutability rule holds as for any
    other mesh. None of the rules that index perHost fails on it ('index out of bounds')."""
    spec = {"hosts": 2, "suspend": True, **({"perHost": per_host} if per_host is not None else {}),
            **({"gpus": gpus} if gpus else {})}
    manifest = {"apiVersion": "procmesh.io/v1alpha1", "kind": "ProcMesh", "metadata": {"name": "solo"}, "spec": spec}
    support.kubectl(cluster, "apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    stored = json.loads(support.kubectl(cluster, "get", "pm", "solo", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"]["perHost"] == []
    patch = json.dumps({"spec": {"perHost": [{"name": "procs", "size": 1}]}})
    result = support.kubectl(cluster, "patch", "pm", "solo", "-n", namespace, "--type=merge", "-p", patch, check=False)
    assert result.returncode != 0 and "perHost is immutable" in result.stderr, result.stderr


@pytest.mark.parametrize("field,value,message", [
    ("hosts", 2, "hosts is immutable"),
    ("perHost", [{"name": "procs", "size": 3}], "perHost is immutable"),
    ("gpus", {"mode": "plugin"}, "gpus is immutable"),
    ("port", 27000, "port is immutable"),
    ("colocateWith", "other", "colocateWith is immutable"),
    ("tokenSecretName", "fixed-token-2", "tokenSecretName is immutable"),
])
def test_immutable_fields(cluster, crd, namespace, custom, field, value, message):
    support.create_mesh(custom, namespace, "fixed", perHost=[{"name": "procs", "size": 1}],
                        suspend=True)
    patch = json.dumps({"spec": {field: value}})
    result = support.kubectl(cluster, "patch", "pm", "fixed", "-n", namespace, "--type=merge",
                             "-p", patch, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    # Mutable fields still change.
    support.kubectl(cluster, "patch", "pm", "fixed", "-n", namespace, "--type=merge",
                    "-p", json.dumps({"spec": {"maxRestarts": 7}}))


def test_perhost_order_is_immutable(cluster, crd, namespace, custom):
    """perHost is a list-type map, whose CEL equality ignores order: reordering the dimensions
    passed `self == oldSelf`, and restarted pods then got coordinates clashing with their peers."""
    dims = [{"name": "a", "size": 2}, {"name": "b", "size": 2}]
    support.create_mesh(custom, namespace, "ordered", perHost=dims, suspend=True)
    patch = json.dumps({"spec": {"perHost": dims[::-1]}})
    result = support.kubectl(cluster, "patch", "pm", "ordered", "-n", namespace, "--type=merge",
                             "-p", patch, check=False)
    assert result.returncode != 0 and "perHost is immutable" in result.stderr, result.stderr
    assert support.get_mesh(custom, namespace, "ordered")["spec"]["perHost"] == dims


def test_a_full_template_is_accepted(cluster, crd, namespace):
    """What a user writes in a Pod passes the template's checks (server-side dry run)."""
    manifest = {"apiVersion": "procmesh.io/v1alpha1", "kind": "ProcMesh",
                "metadata": {"name": "full"},
                "spec": {"perHost": GPUS_2, "gpus": {"mode": "plugin"}, "template": {
                    "image": "registry.example.com:5000/procmesh/proc-server@sha256:" + "0" * 64,
                    "resources": {"requests": {"cpu": "500m", "memory": 1073741824,
                                               "nvidia.com/gpu": "1"},
                                  "limits": {"cpu": 2, "memory": "2Gi", "nvidia.com/gpu": 1}},
                    "env": [{"name": "A", "value": ""}, {"name": "my.env-name", "value": "x y"},
                            {"name": "POD", "valueFrom": {"fieldRef": {
                                "fieldPath": "metadata.name"}}}],
                    "labels": {"app.kubernetes.io/name": "trainer", "empty": "", "v": "a_b-c.d"},
                    "annotations": {"example.com/note": "any text, even this!"},
                    "nodeSelector": {"kubernetes.io/arch": "amd64"},
                    "tolerations": [{"operator": "Exists"},
                                    {"key": "gpu", "operator": "Equal", "value": "yes",
                                     "effect": "NoSchedule"},
                                    {"key": "k", "effect": "NoExecute", "tolerationSeconds": 5}],
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In",
                                                   "values": ["a"]}]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": {"matchExpressions": [
                                {"key": "k", "operator": "Exists"}]}}]},
                        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
                    "serviceAccountName": "trainer.sa", "schedulerName": "volcano",
                    "priorityClassName": "high",
                    "securityContext": {
                        "runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True, "fsGroup": 1000,
                        "fsGroupChangePolicy": "OnRootMismatch", "supplementalGroups": [44],
                        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/proc.json"},
                        "appArmorProfile": {"type": "RuntimeDefault"},
                        "seLinuxOptions": {"level": "s0:c123,c456"}},
                    "containerSecurityContext": {
                        "allowPrivilegeEscalation": False, "runAsNonRoot": True,
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                        "seccompProfile": {"type": "RuntimeDefault"}}}}}
    result = support.kubectl(cluster, "apply", "--dry-run=server", "-n", namespace, "-f", "-",
                             input=json.dumps(manifest), check=False)
    assert result.returncode == 0, result.stderr
