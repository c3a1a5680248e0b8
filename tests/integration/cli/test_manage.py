"""``procmesh create/get/describe/wait/delete`` against the real control plane and operator.

Aspects: create -f from a manifest (stdin too), a file that holds no ProcMesh said in one line naming
it, generateName, a missing namespace named as such, a file for another namespace than -n refused; wait until Ready; get as a table (READY is
ready/desired, as the README shows it), -o wide/json/yaml/name, a missing mesh is an error
naming the namespace, several names act on every mesh that exists; describe's proc -> pod -> node
table and conditions, and only its own events (not those of a deleted mesh of the same name); delete --wait.
"""

from __future__ import annotations

import json

import pytest
import yaml

from mesh_client._src import contract
from tests.cluster import testing
from tests.integration.cli.support import procmesh, start
from tests.integration.kubernetes.relay import Relay, through
from tests.integration.operator.support import create_mesh, wait_condition

pytestmark = pytest.mark.cluster

MANIFEST = """\
apiVersion: procmesh.io/v1alpha1
kind: ProcMesh
metadata: {name: cli-mesh}
spec:
  hosts: 2
  perHost: [{name: procs, size: 2}]
"""


def test_create_wait_get_describe_delete(cluster, core, namespace, operator):
    kc = cluster.kubeconfig
    created = procmesh(kc, "create", "-n", namespace, "-f", "-", input=MANIFEST)
    assert (created.returncode, created.stdout) == (0, "procmesh.procmesh.io/cli-mesh created\n"), created.stderr

    waited = procmesh(kc, "wait", "cli-mesh", "-n", namespace, "--timeout", "120s")
    assert (waited.returncode, waited.stdout) == (0, "procmesh.procmesh.io/cli-mesh condition met\n"), waited.stderr

    table = procmesh(kc, "get", "-n", namespace)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "PHASE", "RESTARTS", "GPUS", "AGE"]
    assert row.split()[:5] == ["cli-mesh", "4/4", "Ready", "0", "none"]

    wide = procmesh(kc, "get", "cli-mesh", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[6:] == ["SHAPE", "BUDGET", "COLOCATED", "WITH", "GENERATION"]
    assert "hosts=2 x procs=2" in wide[1] and wide[1].split()[-1] == "1/1"

    as_json = json.loads(procmesh(kc, "get", "cli-mesh", "-n", namespace, "-o", "json").stdout)
    assert as_json["kind"] == "ProcMesh" and as_json["status"]["readyProcs"] == 4
    as_yaml = yaml.safe_load(procmesh(kc, "get", "-n", namespace, "-o", "yaml").stdout)
    assert [m["metadata"]["name"] for m in as_yaml["items"]] == ["cli-mesh"]
    assert procmesh(kc, "get", "-n", namespace, "-o", "name").stdout == "procmesh.procmesh.io/cli-mesh\n"
    everywhere = procmesh(kc, "get", "-A").stdout.splitlines()
    assert everywhere[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:2] == [namespace, "cli-mesh"] for line in everywhere[1:])

    described = procmesh(kc, "describe", "cli-mesh", "-n", namespace)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert "Shape:          hosts=2 x procs=2 (4 procs)" in text and "Phase:          Ready" in text
    procs = text.split("Procs:\n")[1].split("Events:")[0].splitlines()
    assert procs[0].split()[:5] == ["RANK", "COORDS", "POD", "NODE", "GPU"]
    rows = [line.split() for line in procs[1:]]
    nodes = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(namespace).items}
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (str(rank), f"hosts={rank // 2},procs={rank % 2}", f"cli-mesh-{rank}", nodes[f"cli-mesh-{rank}"])
        for rank in range(4)]
    assert all(r[6:9] == ["true", "Running", "0"] for r in rows)
    assert "Ready                True     AllProcsReady" in text
    assert "cli-mesh-3" in text.split("Events:")[1]  # CreatedProcs names the pods

    # The same name again, another shape: its events only, not the deleted mesh's.
    assert procmesh(kc, "delete", "cli-mesh", "-n", namespace, "--wait").returncode == 0
    again = procmesh(kc, "create", "-n", namespace, "-f", "-",
                     input=MANIFEST.replace("size: 2", "size: 1"))
    assert again.returncode == 0, again.stderr
    assert procmesh(kc, "wait", "cli-mesh", "-n", namespace, "--timeout", "120s").returncode == 0
    events = procmesh(kc, "describe", "cli-mesh", "-n", namespace).stdout.split("Events:")[1]
    assert "2 of 2 procs ready" in events and "cli-mesh-3" not in events, events

    deleted = procmesh(kc, "delete", "cli-mesh", "-n", namespace, "--wait")
    assert (deleted.returncode, deleted.stdout) == (0, 'procmesh.procmesh.io "cli-mesh" deleted\n'), deleted.stderr
    missing = procmesh(kc, "get", "cli-mesh", "-n", namespace)
    assert missing.returncode == 1
    assert f"ProcMesh {namespace}/cli-mesh does not exist" in missing.stderr
    none_left = procmesh(kc, "get", "-n", namespace)
    assert (none_left.stdout, none_left.stderr) == ("", f"No resources found in {namespace} namespace.\n")


def test_create_refuses_what_is_not_a_procmesh(cluster, namespace, operator):
    result = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-",
                      input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert result.returncode == 1
    assert "a v1 ConfigMap is not a ProcMesh" in result.stderr


HEAD = "apiVersion: procmesh.io/v1alpha1\nkind: ProcMesh\n"


@pytest.mark.parametrize(("text", "problem"), [
    ("a: [\n", "not valid YAML or JSON: while parsing a flow node expected the node content"),
    ("- a\n- b\n", "the document is a list, not an object"),
    ("just words\n", "the document is a plain string, not an object"),
    (HEAD + "spec: {hosts: 1}\n", "the document has no metadata.name"),
    ("", "no objects passed to create"),
])
def test_create_says_what_is_wrong_with_the_file_in_one_line(cluster, crd, namespace, tmp_path, text, problem):
    path = tmp_path / "mesh.yaml"
    path.write_text(text)
    result = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", str(path))
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert result.stderr.startswith(f"error: {path}: {problem}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    if not text:  # stdin too (kubectl: "error: no objects passed to create")
        piped = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input="")
        assert (piped.returncode, piped.stderr) == (
            1, "error: <stdin>: no objects passed to create (the file holds no YAML or JSON document)\n")


def test_create_by_generate_name_and_into_a_missing_namespace(cluster, crd, namespace, custom):
    kc = cluster.kubeconfig
    generated = procmesh(kc, "create", "-n", namespace, "-f", "-",
                         input=HEAD + "metadata: {generateName: gen-}\n"
                               "spec: {hosts: 1, perHost: [{name: procs, size: 1}]}\n")
    assert generated.returncode == 0, generated.stderr
    name = generated.stdout.removeprefix("procmesh.procmesh.io/").removesuffix(" created\n")
    assert name.startswith("gen-") and len(name) > 4, generated.stdout
    custom.get_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, name)

    elsewhere = procmesh(kc, "create", "-f", "-",
                         input=HEAD + "metadata: {name: x, namespace: no-such-ns}\n"
                               "spec: {hosts: 1, perHost: [{name: procs, size: 1}]}\n")
    assert elsewhere.returncode == 1
    assert elsewhere.stderr.startswith("error: <stdin>: namespace no-such-ns does not exist, so ProcMesh x "
                                       "cannot be created there"), elsewhere.stderr


def test_create_refuses_another_namespace_than_n_and_a_name_taken(cluster, crd, namespace, custom):
    """As kubectl create -n: the namespace asked for on the command line wins or nothing is
    created, never a mesh silently made in the file's namespace. A name taken is said with what
    to do, for a CLI user as for a Python one."""
    from kubernetes import client

    body = HEAD + "metadata: {name: elsewhere, namespace: default}\nspec: {hosts: 1, perHost: [{name: procs, size: 1}]}\n"
    refused = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input=body)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (f"error: <stdin>: ProcMesh elsewhere is for namespace default, not {namespace} "
                              f"(given by -n): pass -n default, or leave metadata.namespace out of the file\n")
    once = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input=body.replace("default", namespace))
    assert once.returncode == 0, once.stderr
    twice = procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input=body.replace("default", namespace))
    assert (twice.returncode, twice.stderr) == (1, (
        f"error: <stdin>: ProcMesh {namespace}/elsewhere already exists: use it (attach('elsewhere', "
        f"'{namespace}') in Python), delete it first ('procmesh delete elsewhere -n {namespace} --wait'), "
        f"or pick another name\n"))
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(contract.GROUP, contract.VERSION, "default", contract.PLURAL, "elsewhere")
    assert gone.value.status == 404


def test_several_names_act_on_every_mesh_that_exists(cluster, crd, custom, namespace):
    """As kubectl: a missing name is said and the others are still shown or deleted; exit 1."""
    for name in ("d1", "d2"):
        create_mesh(custom, namespace, name, hosts=1, perHost=[{"name": "procs", "size": 1}])
    kc = cluster.kubeconfig
    missing = f"error: ProcMesh {namespace}/nosuch does not exist"

    got = procmesh(kc, "get", "d2", "nosuch", "d1", "-n", namespace)
    assert got.returncode == 1 and got.stderr.startswith(missing), got.stderr
    assert [line.split()[0] for line in got.stdout.splitlines()] == ["NAME", "d2", "d1"]
    named = procmesh(kc, "get", "nosuch", "d1", "-n", namespace, "-o", "name")
    assert (named.returncode, named.stdout) == (1, "procmesh.procmesh.io/d1\n")

    described = procmesh(kc, "describe", "d2", "nosuch", "d1", "-n", namespace)
    assert described.returncode == 1 and described.stderr.startswith(missing), described.stderr
    # What -o name prints is a name again, as with kubectl: procmesh wait $(procmesh get -o name)
    listed = procmesh(kc, "get", "-n", namespace, "-o", "name").stdout.split()
    waited = procmesh(kc, "wait", "-n", namespace, "--for", "delete", "--timeout", "1s", *listed)
    assert [line.split(" s: ")[0] + " s" for line in waited.stderr.splitlines()] == [
        f"error: ProcMesh {namespace}/d1 still exists after 1 s", f"error: ProcMesh {namespace}/d2 still exists after 1 s"]
    typed = procmesh(kc, "get", "-n", namespace, "pod/d1")
    assert typed.returncode == 2 and "'pod/d1' is not a ProcMesh: give its name, or procmesh.procmesh.io/NAME" \
        in typed.stderr
    assert [line.split()[1] for line in described.stdout.splitlines() if line.startswith("Name:")] == ["d2", "d1"]

    deleted = procmesh(kc, "delete", "d1", "nosuch", "d2", "-n", namespace, "--wait")
    assert deleted.returncode == 1 and deleted.stderr.startswith(missing), deleted.stderr
    assert deleted.stdout == 'procmesh.procmesh.io "d1" deleted\nprocmesh.procmesh.io "d2" deleted\n'
    assert custom.list_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace,
                                                contract.PLURAL)["items"] == []


def test_wait_fails_at_once_on_a_cause_no_waiting_fixes(cluster, namespace, operator, gpu_node,
                                                        devices_free):
    # the whole device plus a CUDA context fits no GPU of any node
    greedy = ("apiVersion: procmesh.io/v1alpha1\nkind: ProcMesh\nmetadata: {name: greedy}\n"
              "spec: {hosts: 1, perHost: [{name: gpus, size: 1}],\n"
              "       gpus: {mode: pinned, deviceIDs: [0], memoryFraction: 1.0}}\n")
    assert procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input=greedy).returncode == 0
    fine = MANIFEST.replace("cli-mesh", "fine").replace("hosts: 2", "hosts: 1")
    assert procmesh(cluster.kubeconfig, "create", "-n", namespace, "-f", "-", input=fine).returncode == 0
    # As kubectl wait: the failure is said, and the mesh after it still gets its verdict.
    result = procmesh(cluster.kubeconfig, "wait", "greedy", "fine", "-n", namespace, "--timeout", "10m")
    assert result.returncode == 1
    assert f"ProcMesh {namespace}/greedy cannot become Ready" in result.stderr
    assert result.stdout == "procmesh.procmesh.io/fine condition met\n", (result.stdout, result.stderr)


def test_delete_wait_says_every_mesh_still_there(cluster, crd, custom, namespace):
    """``delete --wait`` past its timeout names each mesh a finalizer holds, not only the first."""
    for name in ("held1", "held2"):
        create_mesh(custom, namespace, name, hosts=1, perHost=[{"name": "procs", "size": 1}])
        custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL,
                                              name, {"metadata": {"finalizers": ["example.com/hold"]}})
    try:
        result = procmesh(cluster.kubeconfig, "delete", "held1", "held2", "-n", namespace,
                          "--wait", "--timeout", "1s")
        assert result.returncode == 1
        for name in ("held1", "held2"):
            assert f"ProcMesh {namespace}/{name} still exists after 1 s" in result.stderr, result.stderr
            assert f'procmesh.procmesh.io "{name}" deleted' in result.stdout
    finally:
        for name in ("held1", "held2"):
            custom.patch_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL,
                                                  name, {"metadata": {"finalizers": None}})


def test_describe_shows_the_schedulers_reason_in_a_condition(cluster, namespace, operator):
    nowhere = MANIFEST.replace("cli-mesh", "nowhere") + \
        "  template: {nodeSelector: {example.com/no-such-label: x}}\n"
    kc = cluster.kubeconfig
    assert procmesh(kc, "create", "-n", namespace, "-f", "-", input=nowhere).returncode == 0

    def unschedulable() -> str | None:
        text = procmesh(kc, "describe", "nowhere", "-n", namespace).stdout
        ready = [line for line in text.splitlines() if line.strip().startswith("Ready ")]
        return text if ready and "Unschedulable" in ready[0] else None

    text = testing.wait_for(unschedulable, "Ready=False Unschedulable in describe")
    ready = next(line for line in text.splitlines() if line.strip().startswith("Ready "))
    # The scheduler's own words about the selector: for the whole gang (the PodGroup's
    # message, per node) where the cluster gang-schedules, else for the first Pending pod.
    assert "the kube-scheduler holds the whole gang" in ready or "is Pending: 0/" in ready, ready
    assert "does not match the pod's node selector" in ready or "node(s) didn't match" in ready, ready
    assert "Pending (Unschedulable)" in text.split("Procs:")[1]
    waited = procmesh(kc, "wait", "nowhere", "-n", namespace, "--timeout", "3s")
    assert waited.returncode == 1 and "Unschedulable" in waited.stderr, waited.stderr


def test_an_api_server_out_of_reach_is_one_line_not_a_traceback(cluster, crd, namespace, tmp_path):
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    kubeconfig = through(relay, cluster, tmp_path)
    assert procmesh(kubeconfig, "get", "-n", namespace).returncode == 0  # through the relay: answered
    relay.close()
    result = procmesh(kubeconfig, "get", "-n", namespace)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach the API server https://127.0.0.1:{relay.port} to list "
                                    f"procmeshes in namespace {namespace}"), result.stderr
    assert "Traceback" not in result.stderr


def test_wait_for_delete_rides_out_an_api_server_that_stops_answering(cluster, crd, custom, namespace, tmp_path,
                                                                     monkeypatch):
    """As `wait --for condition=Ready`: a request the API server does not answer is asked
    again until the wait's timeout (before, the first one ended the wait with an error)."""
    create_mesh(custom, namespace, "going", hosts=1, perHost=[{"name": "procs", "size": 1}])
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    relay.holding.set()  # connections accepted, nothing answered
    monkeypatch.setenv("PROCMESH_API_TIMEOUT", "1")
    waiting = start(through(relay, cluster, tmp_path), "wait", "going", "-n", namespace, "--for", "delete",
                    "--timeout", "120s")
    try:
        testing.wait_for(lambda: relay.accepted >= 1 or None, "the wait's first request, unanswered")
        custom.delete_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL, "going")
        relay.holding.clear()  # answering again: the next request goes through
        _, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err
    finally:
        if waiting.poll() is None:
            waiting.kill()
        relay.close()


def test_wait_names_the_reconcile_error_that_holds_a_mesh_back(cluster, core, custom, namespace, operator):
    """A pod under a rank's name that is not the mesh's (``kubectl run fx-0``): the operator
    says so in Degraded and retries; ``wait`` gives that, not the 'Scheduling' it leaves behind."""
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fx-0"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})
    create_mesh(custom, namespace, "fx", perHost=[{"name": "procs", "size": 2}])
    wait_condition(custom, namespace, "fx", "Degraded", "True", "ReconcileError")
    waited = procmesh(cluster.kubeconfig, "wait", "fx", "-n", namespace, "--timeout", "2s")
    assert waited.returncode == 1
    assert waited.stderr.startswith(f"error: ProcMesh {namespace}/fx was not Ready after 2 s: ReconcileError: "
                                    f"pod fx-0 exists and is not owned by this ProcMesh"), waited.stderr


def test_an_empty_name_deletes_nothing(cluster, crd, kube, custom, namespace):
    """``procmesh delete "$MESH"`` with MESH unset: the path of an empty name is the collection's,
    and its DELETE deleted every mesh of the namespace (said as 'procmesh.procmesh.io "" deleted')."""
    from mesh_client._src.kubernetes import api as api_mod

    for name in ("keep1", "keep2"):
        create_mesh(custom, namespace, name, hosts=1, perHost=[{"name": "procs", "size": 1}], suspend=True)
    deleted = procmesh(cluster.kubeconfig, "delete", "-n", namespace, "")
    assert (deleted.returncode, deleted.stdout) == (2, "")
    assert "error: argument MESH: '' is not a ProcMesh name" in deleted.stderr
    with pytest.raises(ValueError):
        api_mod.KubeApi(kube, namespace).delete_mesh("")
    left = custom.list_namespaced_custom_object(contract.GROUP, contract.VERSION, namespace, contract.PLURAL)
    assert sorted(m["metadata"]["name"] for m in left["items"]) == ["keep1", "keep2"]
