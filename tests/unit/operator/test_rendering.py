"""Pod, Service and Secret rendering (like KubeRay's pod_test.go): env, labels, GPUs, affinity.

Aspects: the proc server command and env contract; token volume; labels per coordinate;
pinned env; plugin resource and GFD affinity; node pinning ANDed into user affinity; user env,
labels and template fields; the headless Service; the Secret.
"""

import base64
import dataclasses
import json

from mesh_client._src import contract
from procmesh_operator import names, rendering

from .builders import SETTINGS, mesh


def env_of(pod):
    c = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def test_proc_server_contract():
    m = mesh("trainer", hosts=2, per_host=(("gpus", 2),), port=27000)
    pod = rendering.render_pod(m, 3, rendering.ProcPlacement(), SETTINGS)
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["python", "-m", "mesh_client.proc_server"]
    assert c["image"] == "procmesh/proc-server:0.1.0"
    env = env_of(pod)
    assert env["PROCMESH_LISTEN_HOST"] == {"fieldRef": {"apiVersion": "v1",
                                                       "fieldPath": "status.podIP"}}
    assert env["PROCMESH_PORT"] == "27000"
    assert env["PROCMESH_MESH"] == "trainer"
    assert env["PROCMESH_RANK"] == "3"
    assert json.loads(env["PROCMESH_COORDS"]) == {"hosts": 1, "gpus": 1}
    assert env["PROCMESH_TOKEN_FILE"] == "/var/run/procmesh/token"
    assert "PROCMESH_MEMORY_FRACTION" not in env
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert c["readinessProbe"]["tcpSocket"] == {"port": 27000}
    assert c["volumeMounts"][0]["mountPath"] == names.TOKEN_DIR
    volume = pod["spec"]["volumes"][0]
    assert volume["secret"]["secretName"] == "trainer-token"
    assert volume["secret"]["items"] == [{"key": "token", "path": "token"}]


def test_identity_labels_owner():
    m = mesh("trainer", hosts=2, per_host=(("gpus", 2),))
    pod = rendering.render_pod(m, 2, rendering.ProcPlacement(), SETTINGS)
    meta = pod["metadata"]
    assert meta["name"] == "trainer-2" and meta["namespace"] == "ns"
    assert meta["labels"][contract.MESH_LABEL] == "trainer"
    assert meta["labels"][contract.RANK_LABEL] == "2"
    assert meta["labels"]["coord.procmesh.io/hosts"] == "1"
    assert meta["labels"]["coord.procmesh.io/gpus"] == "0"
    owner = meta["ownerReferences"][0]
    assert owner["kind"] == "ProcMesh" and owner["uid"] == "uid-trainer" and owner["controller"]
    assert pod["spec"]["hostname"] == "trainer-2"
    assert pod["spec"]["subdomain"] == "trainer-procs"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_pinned_mode_names_exactly_its_device():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [3, 5], "memoryFraction": 0.25})
    pod = rendering.render_pod(m, 1, rendering.ProcPlacement(node="n2", device="5"), SETTINGS)
    env = env_of(pod)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "5"
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["PROCMESH_MEMORY_FRACTION"] == "0.25"
    assert "resources" not in pod["spec"]["containers"][0]  # no GPU request in pinned mode
    assert pod["metadata"]["annotations"][contract.GPU_DEVICE_ANNOTATION] == "5"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                       "values": ["n2"]}]}]


def test_plugin_mode_requests_resource_with_gfd_affinity():
    m = mesh(gpus={"mode": "plugin", "resourceName": "nvidia.com/gpu.shared",
                   "memoryFraction": 0.5},
             template={"resources": {"limits": {"cpu": "1"}}})
    pod = rendering.render_pod(m, 0, rendering.ProcPlacement(), SETTINGS)
    c = pod["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"cpu": "1", "nvidia.com/gpu.shared": 1}
    env = env_of(pod)
    assert "NVIDIA_VISIBLE_DEVICES" not in env and "CUDA_VISIBLE_DEVICES" not in env
    assert env["PROCMESH_MEMORY_FRACTION"] == "0.5"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In",
                                            "values": ["true"]}]}]


def test_node_pin_is_anded_into_every_user_term():
    user_terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                  {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    m = mesh(template={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": user_terms}}}})
    pod = rendering.render_pod(m, 0, rendering.ProcPlacement(node="n9"), SETTINGS)
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2
    for term in terms:
        assert term["matchFields"] == [{"key": "metadata.name", "operator": "In",
                                        "values": ["n9"]}]
    assert user_terms[0].get("matchFields") is None  # the spec was not mutated


def test_template_passthrough_and_env_precedence():
    m = mesh(template={
        "image": "me/img:1", "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "FOO", "value": "bar"}, {"name": "CUDA_VISIBLE_DEVICES", "value": "7"}],
        "nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "schedulerName": "volcano", "serviceAccountName": "sa", "priorityClassName": "high",
        "labels": {"kueue.x-k8s.io/queue-name": "q", contract.MESH_LABEL: "spoof"},
        "annotations": {"scheduling.k8s.io/group-name": "g"}},
        gpus={"mode": "pinned", "deviceIDs": [0, 1]})
    pod = rendering.render_pod(m, 0, rendering.ProcPlacement(node="n1", device="0"), SETTINGS)
    spec = pod["spec"]
    assert spec["containers"][0]["image"] == "me/img:1"
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    env = env_of(pod)
    assert env["FOO"] == "bar" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert [e["name"] for e in spec["containers"][0]["env"]].count("CUDA_VISIBLE_DEVICES") == 1
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["schedulerName"] == "volcano" and spec["serviceAccountName"] == "sa"
    assert spec["priorityClassName"] == "high"
    assert spec["tolerations"][0] == {"key": "gpu", "operator": "Exists"}
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert pod["metadata"]["labels"][contract.MESH_LABEL] == "m"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "g"


def test_service_is_headless_and_publishes_not_ready():
    svc = rendering.render_service(mesh("trainer"))
    assert svc["metadata"]["name"] == "trainer-procs"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {contract.MESH_LABEL: "trainer"}
    assert svc["spec"]["ports"][0]["port"] == 26600


def test_secret_holds_the_given_token():
    token = rendering.new_token()
    assert len(token) == 64 and token != rendering.new_token()
    secret = rendering.render_secret(mesh("trainer"), token)
    assert "name" not in secret["metadata"]  # the API server picks it: nobody had it first
    assert secret["metadata"]["generateName"] == "trainer-token-"
    assert base64.b64decode(secret["data"]["token"]).decode() == token
    assert secret["metadata"]["ownerReferences"][0]["name"] == "trainer"
    again = rendering.render_secret(mesh("trainer"), token, "trainer-token-x7k2p")
    assert again["metadata"]["name"] == "trainer-token-x7k2p"
    assert "generateName" not in again["metadata"]


def test_pods_and_role_name_the_recorded_secret():
    recorded = mesh("trainer", status={"tokenSecretName": "trainer-token-x7k2p"})
    pod = rendering.render_pod(recorded, 0, rendering.ProcPlacement(), SETTINGS)
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "trainer-token-x7k2p"
    role = rendering.render_access_role(recorded)
    assert role["rules"][1]["resourceNames"] == ["trainer-token-x7k2p"]


def test_rendering_is_deterministic():
    m = mesh(gpus={"mode": "plugin"})
    a = rendering.render_pod(m, 1, rendering.ProcPlacement(), SETTINGS)
    b = rendering.render_pod(m, 1, rendering.ProcPlacement(), SETTINGS)
    assert a == b


def test_access_role_names_only_this_mesh_and_its_secret():
    role = rendering.render_access_role(mesh("trainer"))
    assert role["metadata"]["name"] == "trainer-procmesh-access"
    assert role["metadata"]["ownerReferences"][0]["name"] == "trainer"
    assert role["rules"] == [
        {"apiGroups": ["procmesh.io"], "resources": ["procmeshes"],
         "resourceNames": ["trainer"], "verbs": ["get", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["trainer-token"],
         "verbs": ["get"]}]
    own = rendering.render_access_role(mesh("trainer", tokenSecretName="trainer-token-x1"))
    assert own["rules"][1]["resourceNames"] == ["trainer-token-x1"]


def test_no_service_account_token_unless_the_template_asks():
    pod = rendering.render_pod(mesh("m"), 0, rendering.ProcPlacement(), SETTINGS)
    assert pod["spec"]["automountServiceAccountToken"] is False
    asked = mesh("m", template={"automountServiceAccountToken": True})
    pod = rendering.render_pod(asked, 0, rendering.ProcPlacement(), SETTINGS)
    assert pod["spec"]["automountServiceAccountToken"] is True


def contexts(template=None):
    pod = rendering.render_pod(mesh("m", template=template or {}), 0, rendering.ProcPlacement(),
                               SETTINGS)
    return pod["spec"]["securityContext"], pod["spec"]["containers"][0]["securityContext"]


def test_a_default_proc_pod_passes_pod_security_restricted():
    """What the "restricted" profile checks: non-root, RuntimeDefault seccomp, no privilege
    escalation, every capability dropped (and no host namespace, port or path: none rendered)."""
    pod_sc, container_sc = contexts()
    assert pod_sc == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True}
    assert container_sc == {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": False}


def test_an_image_of_the_users_is_not_assumed_to_run_as_non_root():
    pod_sc, _ = contexts({"image": "example.com/trainer:1"})
    assert pod_sc == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_a_default_image_said_to_run_as_root_gets_no_run_as_non_root():
    """A platform's default image that runs as root (--default-image-runs-as-root): the kubelet
    would refuse every pod of it that said runAsNonRoot."""
    root = dataclasses.replace(SETTINGS, default_image="example.com/proc:1", default_image_non_root=False)
    pod = rendering.render_pod(mesh("m"), 0, rendering.ProcPlacement(), root)
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["spec"]["containers"][0]["image"] == "example.com/proc:1"


def test_the_templates_security_fields_replace_the_operators():
    pod_sc, container_sc = contexts({
        "image": "example.com/trainer:1",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000,
                            "seccompProfile": {"type": "Unconfined"}},
        "containerSecurityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}})
    assert pod_sc == {"seccompProfile": {"type": "Unconfined"}, "runAsNonRoot": True,
                      "runAsUser": 1000, "fsGroup": 1000}
    assert container_sc == {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                            "allowPrivilegeEscalation": False}
    _, privileged = contexts({"containerSecurityContext": {"privileged": True}})
    assert privileged == {"capabilities": {"drop": ["ALL"]}, "privileged": True}  # a valid pair
    _, opened = contexts({"containerSecurityContext": {"allowPrivilegeEscalation": True}})
    assert opened["allowPrivilegeEscalation"] is True
    _, added = contexts({"containerSecurityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}})
    assert added["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}  # restricted's way
    _, admin = contexts({"containerSecurityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}})
    assert "allowPrivilegeEscalation" not in admin  # the Pod API refuses the pair


def test_node_loss_tolerations_are_counted_by_the_operator_unless_the_template_has_its_own():
    short = dataclasses.replace(SETTINGS, node_loss_toleration_seconds=7)
    pod = rendering.render_pod(mesh(), 0, rendering.ProcPlacement(), short)
    spec = pod["spec"]
    # Without end for the taint eviction controller; the annotation gives the operator's 7 s.
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
    assert pod["metadata"]["annotations"]["procmesh.io/node-loss-toleration-seconds"] == \
        "node.kubernetes.io/not-ready=7,node.kubernetes.io/unreachable=7"
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 600}
    pod = rendering.render_pod(mesh(template={"tolerations": [own]}), 0,
                               rendering.ProcPlacement(), short)
    spec = pod["spec"]
    assert [t.get("tolerationSeconds") for t in spec["tolerations"]] == [600, None]
    assert spec["tolerations"][1]["key"] == "node.kubernetes.io/not-ready"
    assert pod["metadata"]["annotations"]["procmesh.io/node-loss-toleration-seconds"] == \
        "node.kubernetes.io/not-ready=7"
    everything = {"operator": "Exists"}
    spec = rendering.render_pod(mesh(template={"tolerations": [everything]}), 0,
                                rendering.ProcPlacement(), short)["spec"]
    assert spec["tolerations"] == [everything]


def test_a_template_toleration_that_does_not_tolerate_a_node_loss_taint_leaves_it_to_the_operator():
    """Only a toleration the taint eviction controller would match covers a node-loss taint: one
    of another effect, or with a value (the taint has none), does not, and without the
    operator's the pod would be evicted at once from a lost node."""
    short = dataclasses.replace(SETTINGS, node_loss_toleration_seconds=7)
    for own in ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "value": "yes"}):
        pod = rendering.render_pod(mesh(template={"tolerations": [own]}), 0,
                                   rendering.ProcPlacement(), short)
        assert pod["spec"]["tolerations"] == [
            own,
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
        assert pod["metadata"]["annotations"]["procmesh.io/node-loss-toleration-seconds"] == \
            "node.kubernetes.io/not-ready=7,node.kubernetes.io/unreachable=7"
    valueless = {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "effect": "NoExecute",
                 "tolerationSeconds": 60}  # Equal without a value matches the value-less taint
    pod = rendering.render_pod(mesh(template={"tolerations": [valueless]}), 0,
                               rendering.ProcPlacement(), short)
    assert [t["key"] for t in pod["spec"]["tolerations"]] == [
        "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]


def test_pod_tolerations_are_those_every_pod_carries():
    """Pinned placement judges taints by pod_tolerations: they are the rendered pods' own."""
    dedicated = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    m = mesh(template={"tolerations": [dedicated]})
    tolerations, counted = rendering.pod_tolerations(m, SETTINGS)
    pod = rendering.render_pod(m, 1, rendering.ProcPlacement("n1", "1"), SETTINGS)
    assert pod["spec"]["tolerations"] == tolerations and tolerations[0] == dedicated
    assert pod["metadata"]["annotations"][names.NODE_LOSS_ANNOTATION] == counted
    tolerations[0]["key"] = "changed"  # a copy: the template is left as it was
    assert m.template["tolerations"] == [dedicated]
