"""helm install, upgrade and uninstall on the local control plane, with the operator's own pod on
the process node (the chart's service account, projected token and RBAC; in-cluster config).

The tests share one release (module fixture) and run in file order: install and reconcile,
two replicas (the leader election's Lease, and kopf peering), a drain that evicts one replica at
a time (the disruption budget), a CRD upgrade, the README's upgrade command to a chart with a
new value, uninstall with and without the keep option.
"""

from __future__ import annotations

import json
import shlex
import shutil
import urllib.request

import pytest
import yaml
from kubernetes import client

from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.helm import support
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import (
    create_mesh,
    events,
    get_mesh,
    identify,
    kubectl,
    token,
    wait_ready,
)

pytestmark = pytest.mark.cluster

CRD = "procmeshes.procmesh.io"


@pytest.fixture(scope="module")
def release(cluster, namespaces, core):
    support.install(cluster)
    yield support.wait_operator_running(core)
    support.uninstall(cluster)


def crd_exists(cluster) -> bool:
    return kubectl(cluster, "get", "crd", CRD, check=False).returncode == 0


def test_operator_pod_reconciles_a_mesh(cluster, release, core, custom, namespace):
    [pod] = support.wait_operator_running(core)
    assert pod.spec.service_account_name == support.FULLNAME
    assert pod.spec.node_name == "node-0"
    create_mesh(custom, namespace, "m", perHost=[{"name": "procs", "size": 2}])
    mesh = wait_ready(custom, namespace, "m")
    assert [p["ready"] for p in mesh["status"]["procs"]] == [True, True]
    # The client's path: the token Secret, then each proc server directly.
    answer = identify(mesh["status"]["procs"][1]["address"], token(core, namespace, "m"))
    assert answer["rank"] == 1
    # The operator posts the event after the status write that made the mesh Ready: wait for it.
    testing.wait_for(lambda: any(e.reason == "MeshReady" for e in events(core, namespace, "m")), "a MeshReady event")


def test_operator_log_has_no_forbidden_request(cluster, release, core):
    [pod] = support.wait_operator_running(core)
    assert not support.forbidden_messages(cluster, pod.metadata.name)


def test_metrics_service_serves_the_operator_metrics(release, core):
    [pod] = support.wait_operator_running(core)
    service = core.read_namespaced_service(f"{support.FULLNAME}-metrics", support.RELEASE_NAMESPACE)
    assert [(p.name, p.port) for p in service.spec.ports] == [("metrics", 9090)]
    assert service.spec.selector.items() <= pod.metadata.labels.items()
    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:9090/metrics", timeout=10) as r:
        assert "procmesh_" in r.read().decode()


ONE_ACTIVE = {"lease": {}, "peering": {"leaderElection.enabled": False, "peering.enabled": True}}


@pytest.mark.parametrize("way", sorted(ONE_ACTIVE))
def test_second_replica_waits(cluster, release, core, custom, namespace, way):
    support.install(cluster, sets={"replicaCount": 2, **ONE_ACTIVE[way]})
    pods = support.wait_operator_running(core, count=2)
    names = {p.metadata.name for p in pods}

    def roles() -> tuple[str, str] | None:
        # Both ways key replicas by pod name (POD_ID): the Lease's holder acts, or the highest
        # peering priority; the other waits.
        if way == "lease":
            holder = client.CoordinationV1Api(custom.api_client).read_namespaced_lease(
                "procmesh-operator", support.RELEASE_NAMESPACE).spec.holder_identity
            return (holder, (names - {holder}).pop()) if holder in names else None
        peering = custom.get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings",
                                                   "procmesh")
        peers = {k: v["priority"] for k, v in (peering.get("status") or {}).items()
                 if k in names}
        if len(peers) != 2:
            return None
        ordered = sorted(peers, key=peers.get)
        return ordered[1], ordered[0]

    active, waiting = testing.wait_for(roles, f"one of both replicas active ({way})")
    create_mesh(custom, namespace, f"during-ha-{way}")
    wait_ready(custom, namespace, f"during-ha-{way}")
    # Every Event of the mesh comes from the active replica (reportingInstance: its pod's
    # hostname); the waiting one watches too, but acts on nothing.
    reporters = {e.reporting_instance for e in events(core, namespace, f"during-ha-{way}")}
    assert reporters == {active}, (reporters, active, waiting)
    # The active replica goes; the waiting one (or a replacement) takes over.
    core.delete_namespaced_pod(active, support.RELEASE_NAMESPACE)
    create_mesh(custom, namespace, f"after-failover-{way}")
    wait_ready(custom, namespace, f"after-failover-{way}")
    support.install(cluster)  # back to one replica, the chart's defaults
    support.wait_operator_running(core)


def test_a_drain_evicts_one_replica_at_a_time(cluster, release, core):
    support.install(cluster, sets={"replicaCount": 2})
    pods = support.wait_operator_running(core, count=2)
    budgets = client.PolicyV1Api(core.api_client)
    testing.wait_for(lambda: budgets.read_namespaced_pod_disruption_budget(
        support.FULLNAME, support.RELEASE_NAMESPACE).status.disruptions_allowed == 1,
        "the disruption budget allowing one eviction")
    # What `kubectl drain node-0` does, one eviction after the other; cordoned, the node takes no
    # replacement, so no third replica becomes Ready in between.
    kubectl(cluster, "cordon", "node-0")
    try:
        refusals = []
        for pod in pods:
            eviction = client.V1Eviction(metadata=client.V1ObjectMeta(
                name=pod.metadata.name, namespace=support.RELEASE_NAMESPACE))
            try:
                core.create_namespaced_pod_eviction(pod.metadata.name, support.RELEASE_NAMESPACE,
                                                    eviction)
            except client.ApiException as refused:
                refusals.append((refused.status, refused.body))
        [(status, body)] = refusals
        assert status == 429 and "disruption budget" in body, body
    finally:
        kubectl(cluster, "uncordon", "node-0")
    support.wait_operator_running(core, count=2)
    support.install(cluster)  # back to one replica, the chart's defaults
    support.wait_operator_running(core)


def test_upgrade_changes_the_crd_and_keeps_meshes(cluster, release, core, custom, namespace,
                                                  tmp_path):
    create_mesh(custom, namespace, "kept")
    before = wait_ready(custom, namespace, "kept")
    chart = tmp_path / "procmesh-operator"
    shutil.copytree(support.CHART, chart)
    crd_file = chart / "files" / "procmesh.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["upgradeMarker"] = {"type": "string",
                                                  "description": "added by the upgrade test"}
    crd_file.write_text(yaml.safe_dump(crd, sort_keys=False))
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = "0.1.1"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))

    support.install(cluster, chart=chart)

    served = kubectl(cluster, "get", "crd", CRD, "-o",
                     "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec"
                     ".properties.upgradeMarker.type}").stdout
    assert served == "string"
    after = wait_ready(custom, namespace, "kept")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    # The new field is stored, not pruned.
    custom.patch_namespaced_custom_object("procmesh.io", "v1alpha1", namespace, "procmeshes",
                                          "kept", {"spec": {"upgradeMarker": "yes"}})
    assert get_mesh(custom, namespace, "kept")["spec"]["upgradeMarker"] == "yes"
    history = support.helm(cluster, "history", support.RELEASE, "-n", support.RELEASE_NAMESPACE,
                           "-o", "json").stdout
    assert '"chart":"procmesh-operator-0.1.1"' in history.replace(" ", "")
    support.install(cluster)  # back to the chart of this checkout


def documented_upgrade() -> list[str]:
    """The arguments of the chart README's upgrade command (after ``helm``)."""
    readme = (support.CHART / "README.md").read_text()
    section = readme.split("### Upgrade", 1)[1].split("\n### ", 1)[0]
    [line] = [line for line in section.splitlines() if line.startswith("helm upgrade ")]
    return shlex.split(line)[1:]


def test_the_documented_upgrade_takes_new_chart_values_and_keeps_the_given_ones(cluster, release,
                                                                                 core, tmp_path):
    # The next chart version adds a value that a template reads. `--reuse-values` renders with
    # the installed version's values, where the new one is missing ("nil pointer evaluating
    # interface {}.enabled" for leaderElection, added after 0.1.0's first release).
    chart = tmp_path / "procmesh-operator"
    shutil.copytree(support.CHART, chart)
    with (chart / "values.yaml").open("a") as values:
        values.write("\nupgradeProbe:\n  name: added-in-the-next-version\n")
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"]["upgradeProbe"] = {"type": "object"}
    (chart / "values.schema.json").write_text(json.dumps(schema))
    (chart / "templates" / "upgrade-probe.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.upgradeProbe.name }}\n"
        "  namespace: {{ .Release.Namespace }}\n")
    args = [str(chart) if arg == "charts/procmesh-operator" else arg for arg in documented_upgrade()]
    assert str(chart) in args, args

    support.helm(cluster, *args, "--timeout", "180s")

    assert core.read_namespaced_config_map("added-in-the-next-version", support.RELEASE_NAMESPACE)
    # The values given at install (tests/integration/helm/values/process-node.yaml) are kept.
    [pod] = support.wait_operator_running(core)
    assert "--resync-seconds=5" in pod.spec.containers[0].args
    support.install(cluster)  # back to the chart of this checkout


def revision(cluster) -> int:
    history = json.loads(support.helm(cluster, "history", support.RELEASE, "-n",
                                      support.RELEASE_NAMESPACE, "-o", "json").stdout)
    return max(int(entry["revision"]) for entry in history)


def test_upgrade_and_rollback_leave_a_running_mesh_and_its_client_alone(cluster, release, kube,
                                                                         core, custom, namespace):
    """A helm upgrade that replaces the operator (new values: the proc server image, the resync
    period), then a helm rollback to the revision before it: the running mesh keeps its pods,
    a connected client's calls go on, restarts stay 0, and each operator after the switch
    reconciles the mesh (a spec edit it observes) with Ready and every condition on the new
    generation."""
    create_mesh(custom, namespace, "steady", perHost=[{"name": "procs", "size": 2}],
                maxRestarts=3)
    wait_ready(custom, namespace, "steady")
    pods = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(
        namespace, label_selector="procmesh.io/mesh=steady").items}
    before = revision(cluster)
    mesh = attach("steady", namespace, api_client=kube, timeout=120, progress=False)
    try:
        actor = mesh.spawn("rec", Recorder)
        assert list(actor.echo.call(0).get().values()) == [0, 0]
        steps = [("upgrade", lambda: support.install(cluster, sets={
                     "operator.procServerImage.tag": "next", "operator.resyncSeconds": 7})),
                 ("rollback", lambda: support.helm(cluster, "rollback", support.RELEASE,
                                                   str(before), "-n", support.RELEASE_NAMESPACE,
                                                   "--wait", "--timeout", "180s"))]
        for number, (step, switch) in enumerate(steps, start=1):
            [old] = support.wait_operator_running(core)
            switch()
            [new] = support.wait_operator_running(core)  # helm waited for its rollout
            assert new.metadata.name != old.metadata.name, step
            custom.patch_namespaced_custom_object("procmesh.io", "v1alpha1", namespace,
                                                  "procmeshes", "steady",
                                                  {"spec": {"maxRestarts": 3 + number}})
            after = wait_ready(custom, namespace, "steady")
            generation = after["metadata"]["generation"]
            conditions = after["status"]["conditions"]
            assert after["status"]["observedGeneration"] == generation, (step, after["status"])
            assert {c["type"]: c["observedGeneration"] for c in conditions} == \
                {c["type"]: generation for c in conditions}, (step, conditions)
            assert after["status"]["restarts"] == 0 and after["status"]["phase"] == "Ready", step
            assert {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(
                namespace, label_selector="procmesh.io/mesh=steady").items} == pods, step
            assert list(actor.echo.call(number).get().values()) == [number, number], step
    finally:
        mesh.stop().get()
    assert '"tag":"next"' not in support.helm(cluster, "get", "values", support.RELEASE, "-n",
                                              support.RELEASE_NAMESPACE, "-o", "json"
                                              ).stdout.replace(" ", "")
    support.install(cluster)  # back to the chart of this checkout


def test_uninstall_keeps_the_crd_and_the_meshes(cluster, release, core, custom, namespace):
    create_mesh(custom, namespace, "survivor")
    wait_ready(custom, namespace, "survivor")
    support.uninstall(cluster)
    testing.wait_for(lambda: not support.operator_pods(core), "operator pods gone")
    deployments = kubectl(cluster, "get", "deploy", "-n", support.RELEASE_NAMESPACE,
                          "-o", "name").stdout
    assert deployments.strip() == ""
    assert crd_exists(cluster)
    assert get_mesh(custom, namespace, "survivor")["metadata"]["name"] == "survivor"


def test_uninstall_without_keep_removes_the_crd(cluster, release, core, custom, namespace):
    support.install(cluster, sets={"crds.keep": False})  # adopts the kept CRD
    support.wait_operator_running(core)
    create_mesh(custom, namespace, "doomed")
    wait_ready(custom, namespace, "doomed")
    # Turning the CRD off would delete it, and every mesh: refused. (Adopted, the CRD still
    # carries the keep policy of its first install, which Helm reads from the live object: as
    # installed with crds.keep=false from the start, it has none.)
    kubectl(cluster, "annotate", "crd", "procmeshes.procmesh.io", "helm.sh/resource-policy-")
    with pytest.raises(AssertionError, match="crds.install=false would make Helm delete the ProcMesh CRD"):
        support.install(cluster, sets={"crds.keep": False, "crds.install": False})
    assert crd_exists(cluster) and get_mesh(custom, namespace, "doomed")
    support.uninstall(cluster)
    testing.wait_for(lambda: not crd_exists(cluster), "the CRD deleted")
    assert kubectl(cluster, "get", "procmeshes", "-n", namespace, check=False).returncode != 0
