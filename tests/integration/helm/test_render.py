"""The chart renders, and the API server accepts what it renders.

Aspects:
- helm lint passes with the defaults and with every values file;
- a wrong value fails at template time with a message that names it (values.schema.json);
- every manifest rendered from every values file passes a server-side dry run;
- the rendered CRD is crds/procmesh.yaml, with the keep annotation only when asked;
- namespaced mode grants nothing namespaced cluster-wide;
- the client role reads no Secret; the admission policy is on unless turned off;
- a second release (another release name, in another namespace or the same one) renders no
  object of the same kind, namespace and name as the first, and leads on a Lease of its own;
- more than one replica comes with a PodDisruptionBudget that lets a drain evict one at a time;
- a digest pins either image (repository@digest) and wins over the tag;
- the install's notes grant a mesh with `procmesh grant`, not a RoleBinding that outlives it.
"""

from __future__ import annotations

import pytest
import yaml

from tests.integration.helm import support
from tests.integration.operator.support import ROOT, kubectl

pytestmark = pytest.mark.cluster

VALUES_FILES = [(), ("namespaced.yaml",), ("ha.yaml",), ("minimal.yaml",),
                ("namespaced.yaml", "ha.yaml")]


@pytest.mark.parametrize("files", VALUES_FILES, ids=lambda f: "+".join(f) or "defaults")
def test_lint(cluster, files):
    support.helm(cluster, "lint", "--strict", str(support.CHART),
                 *support.value_args(*files))


@pytest.mark.parametrize("sets,message", [
    ({"replicaCount": "two"}, "/replicaCount"),
    ({"watch.allNamespaces": False}, "/watch/namespaces"),
    ({"operator.logFormat": "xml"}, "/operator/logFormat"),
    ({"replicas": 2}, "'replicas' not allowed"),
    ({"watch.namespaces": ["Team_A"]}, "/watch/namespaces/0"),
    ({"leaderElection.enabled": False, "replicaCount": 2}, "needs leaderElection.enabled"),
    ({"peering.enabled": True}, "two ways to one active replica"),
    ({"leaderElection.leaseSeconds": 2}, "/leaderElection/leaseSeconds"),
    ({"leaderElection.leaseName": "Lease_1"}, "/leaderElection/leaseName"),
    ({"podDisruptionBudget.maxUnavailable": 0}, "/podDisruptionBudget/maxUnavailable"),
    ({"podDisruptionBudget.maxUnavailable": "half"}, "/podDisruptionBudget/maxUnavailable"),
    ({"podDisruptionBudget.enabled": "yes"}, "/podDisruptionBudget/enabled"),
    ({"image.digest": "latest"}, "/image/digest"),
    ({"image.digest": "sha256:0123abc"}, "/image/digest"),
    ({"image.digest": "sha256:" + "AB" * 32}, "/image/digest"),
    ({"operator.procServerImage.digest": "md5:" + "ab" * 16}, "/operator/procServerImage/digest"),
    # a follower must stay to take the Lease over
    ({"replicaCount": 2, "podDisruptionBudget.maxUnavailable": "100%"}, "/podDisruptionBudget/maxUnavailable"),
    ({"replicaCount": 2, "podDisruptionBudget.maxUnavailable": "51%"}, "evict all 2 replicas at once"),
    ({"replicaCount": 3, "podDisruptionBudget.maxUnavailable": 3}, "evict all 3 replicas at once"),
    # a namespace list that would be ignored, every namespace watched and granted instead
    ({"watch.namespaces": ["team-a"]}, "set watch.allNamespaces=false to watch only those listed"),
    # bindings that would grant nothing
    ({"rbac.clientRole.bindings": [{"namespace": "a", "user": "x"}]}, "set rbac.clientRole.create=true"),
    ({"rbac.clientRole.createMeshes": True}, "set rbac.clientRole.create=true"),
])
def test_wrong_values_fail_with_a_message(cluster, sets, message):
    result = support.helm(cluster, "template", "x", str(support.CHART), "--kube-version",
                          support.KUBE_VERSION, *support.value_args(sets=sets), check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("files", VALUES_FILES, ids=lambda f: "+".join(f) or "defaults")
def test_server_accepts_every_rendered_manifest(cluster, namespaces, files):
    # helm installs the chart's crds/ (the kopf peering CRDs) before the templates; do the same.
    kubectl(cluster, "apply", "--server-side", "-f", str(support.CHART / "crds"))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=60s",
            "crd/clusterkopfpeerings.kopf.dev", "crd/kopfpeerings.kopf.dev")
    docs = support.render(cluster, *files)
    assert docs
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        args = ["-n", namespace] if namespace else []
        result = kubectl(cluster, "apply", "--server-side", "--dry-run=server",
                         "--field-manager=helm-test", *args, "-f", "-",
                         input=yaml.safe_dump(doc), check=False)
        assert result.returncode == 0, (
            f"{doc['kind']}/{doc['metadata']['name']} refused: {result.stderr}")


def test_rendered_crd_is_the_source_crd(cluster):
    source = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
    for keep in (True, False):
        crds = [d for d in support.render(cluster, sets={"crds.keep": keep})
                if d["kind"] == "CustomResourceDefinition"]
        assert [c["metadata"]["name"] for c in crds] == [source["metadata"]["name"]]
        assert crds[0]["spec"] == source["spec"]
        annotations = crds[0]["metadata"].get("annotations") or {}
        assert (annotations.get("helm.sh/resource-policy") == "keep") is keep
    kinds = {d["kind"] for d in support.render(cluster, sets={"crds.install": False})}
    assert "CustomResourceDefinition" not in kinds


def test_namespaced_mode_is_namespaced(cluster):
    docs = support.render(cluster, "namespaced.yaml")
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs
             if d["kind"] in ("Role", "RoleBinding")}
    assert roles == {(ns, support.FULLNAME) for ns in ("team-a", "team-b")} | {
        (support.RELEASE_NAMESPACE, f"{support.FULLNAME}-leader-election")}
    cluster_rules = [r for d in docs if d["kind"] == "ClusterRole" and not _aggregated(d)
                     for r in d["rules"]]
    granted = {res for r in cluster_rules for res in r["resources"]}
    # read-only: for kopf, nodes for node loss (the operator's node watch), the slices of
    # the devices allocated to dra claims (rbac.draGPUs), and for a queued mesh (rbac.kueue)
    # the value of its PriorityClass and its admitted ResourceFlavor's labels and tolerations
    assert granted == {"customresourcedefinitions", "namespaces", "nodes", "resourceslices",
                       "priorityclasses", "resourceflavors"}
    assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in cluster_rules)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--all-namespaces" not in args
    assert not [d for d in docs if d["kind"] == "KopfPeering"]  # the Lease by default
    docs = support.render(cluster, "namespaced.yaml",
                          sets={"leaderElection.enabled": False, "peering.enabled": True})
    peerings = [d for d in docs if d["kind"] == "KopfPeering"]
    assert {p["metadata"]["namespace"] for p in peerings} == {"team-a", "team-b"}


def _child_verbs(docs, namespace="team-a"):
    """The operator's verbs on Services, Roles and ResourceQuotas in ``namespace`` (its Role
    there)."""
    [role] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == namespace
              and d["metadata"]["name"] == support.FULLNAME]
    return {res: {v for r in role["rules"] if res in r["resources"] for v in r["verbs"]}
            for res in ("services", "roles", "resourcequotas")}


def test_services_roles_and_quotas_are_listed_only_where_the_operator_watches_them(cluster):
    # Its own watches recreate a mesh's deleted Service or Role at once (childwatch.py) and
    # place a mesh waiting for quota when a quota changes (quotawatch.py); with kopf's peering
    # they do not run, and nothing is granted for them.
    watched = _child_verbs(support.render(cluster, "namespaced.yaml"))
    assert watched == {"services": {"get", "create", "list", "watch"},
                       "roles": {"get", "create", "escalate", "list", "watch"},
                       "resourcequotas": {"list", "watch"}}
    peering = _child_verbs(support.render(
        cluster, "namespaced.yaml", sets={"leaderElection.enabled": False, "peering.enabled": True}))
    assert peering == {"services": {"get", "create"}, "roles": {"get", "create", "escalate"},
                       "resourcequotas": set()}


def test_leader_election_is_one_lease_in_the_release_namespace(cluster):
    docs = support.render(cluster, "ha.yaml", sets={"leaderElection.leaseSeconds": 20})
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ["--leader-election=procmesh-operator",
            f"--leader-election-namespace={support.RELEASE_NAMESPACE}",
            "--leader-election-lease-seconds=20"] == [a for a in args if "leader" in a]
    assert not [a for a in args if a.startswith(("--peering", "--priority", "--standalone"))]
    [role] = [d for d in docs if d["kind"] == "Role"
              and d["metadata"]["name"] == f"{support.FULLNAME}-leader-election"]
    assert role["metadata"]["namespace"] == support.RELEASE_NAMESPACE
    # get and update only the one Lease by name; create cannot be limited to a name
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["procmesh-operator"], "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]
    assert not [d for d in docs if "Peering" in d["kind"]]
    # "" names the Lease after the release, for a second release in the same namespace
    docs = support.render(cluster, "ha.yaml", sets={"leaderElection.leaseName": ""})
    assert _lease(docs) == support.FULLNAME
    [role] = [d for d in docs if d["metadata"]["name"] == f"{support.FULLNAME}-leader-election"
              and d["kind"] == "Role"]
    assert role["rules"][0]["resourceNames"] == [support.FULLNAME]


def _deployment(docs: list[dict]) -> dict:
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    return deployment


def _container(docs: list[dict]) -> dict:
    [container] = _deployment(docs)["spec"]["template"]["spec"]["containers"]
    return container


def _lease(docs: list[dict]) -> str:
    [arg] = [a for a in _container(docs)["args"] if a.startswith("--leader-election=")]
    return arg.split("=", 1)[1]


def _objects(docs: list[dict]) -> set[tuple[str, str | None, str]]:
    return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}


#: Everything a release can render at once (the client role and its bindings, two replicas,
#: both admission policies, the aggregated roles, the metrics Service), watching `team-a`.
EVERYTHING = {"watch.allNamespaces": False, "watch.namespaces": ["team-a"]}


@pytest.mark.parametrize("namespace", ["procmesh-b-system", support.RELEASE_NAMESPACE])
def test_a_second_release_shares_no_object_with_the_first(cluster, namespace):
    first = support.render(cluster, "ha.yaml", sets=EVERYTHING)
    # The second: no CRD (cluster-scoped, one per cluster), namespaces of its own, and in the
    # first one's namespace a Lease of its own.
    second = support.render(cluster, "ha.yaml", release="procmesh-b", namespace=namespace,
                            sets={**EVERYTHING, "watch.namespaces": ["team-b"],
                                  "crds.install": False, "leaderElection.leaseName": ""})
    kinds = {kind for kind, _, _ in _objects(second)}
    assert {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding", "PodDisruptionBudget"} <= kinds
    assert _objects(first) & _objects(second) == set()
    assert _lease(first) != _lease(second)


def test_more_than_one_replica_has_a_disruption_budget(cluster):
    docs = support.render(cluster, "ha.yaml")
    [budget] = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    deployment = _deployment(docs)
    assert budget["apiVersion"] == "policy/v1"
    assert budget["metadata"]["namespace"] == support.RELEASE_NAMESPACE
    # the Deployment's pods, and only them (the selector is the Deployment's own)
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    # one replica at a time: the others keep the Lease warm; an unready one never holds a drain
    assert budget["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in budget["spec"]
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    docs = support.render(cluster, "ha.yaml", sets={"podDisruptionBudget.maxUnavailable": "50%"})
    [budget] = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert budget["spec"]["maxUnavailable"] == "50%"
    # one replica (the default): a budget could only block drains for good or allow everything
    for sets in ({}, {"replicaCount": 2, "podDisruptionBudget.enabled": False}):
        assert not [d for d in support.render(cluster, sets=sets)
                    if d["kind"] == "PodDisruptionBudget"]


DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_a_digest_pins_the_image_and_wins_over_the_tag(cluster):
    app_version = yaml.safe_load((support.CHART / "Chart.yaml").read_text())["appVersion"]
    container = _container(support.render(cluster, sets={"image.tag": "0.1.0-rc1"}))
    assert container["image"] == "procmesh/operator:0.1.0-rc1"
    assert f"--default-image=procmesh/proc-server:{app_version}" in container["args"]
    other = "sha512:" + "fedcba9876543210" * 8
    container = _container(support.render(cluster, sets={
        "image.tag": "0.1.0-rc1", "image.digest": DIGEST,
        "operator.procServerImage.tag": "0.1.0-rc1", "operator.procServerImage.digest": other}))
    assert container["image"] == f"procmesh/operator@{DIGEST}"
    assert f"--default-image=procmesh/proc-server@{other}" in container["args"]
    assert "--default-image-runs-as-root" not in container["args"]
    container = _container(support.render(cluster, sets={"operator.procServerImage.runsAsRoot": True}))
    assert "--default-image-runs-as-root" in container["args"]


def _aggregated(doc: dict) -> bool:
    """A ClusterRole for Kubernetes' default roles (aggregate-roles.yaml), not the operator's."""
    labels = doc["metadata"].get("labels") or {}
    return any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in labels)


def test_large_whole_numbers_render_as_whole_numbers(cluster, tmp_path):
    """From a values file, YAML's 2000000 reaches the template as a float: rendered as 2e+06,
    the operator's int flags refused it and it exited at start."""
    big = tmp_path / "big.yaml"
    big.write_text("operator: {defaultGPUMemoryMiB: 1048576, cudaContextMiB: 1000000,\n"
                   "           nodeLossTolerationSeconds: 2000000}\n")
    result = support.helm(cluster, "template", "x", str(support.CHART), "--kube-version",
                          support.KUBE_VERSION, "-f", str(big))
    [deployment] = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    for flag in ("--default-gpu-memory-mib=1048576", "--cuda-context-mib=1000000",
                 "--node-loss-toleration-seconds=2000000"):
        assert flag in args, args


def test_client_role_binds_users_groups_and_service_accounts(cluster):
    bindings = [{"namespace": "team-a", "serviceAccount": "ctl"},
                {"namespace": "team-a", "user": "alice@example.com"},
                {"namespace": "team-b", "group": "ml-researchers"}]
    docs = support.render(cluster, "ha.yaml", sets={"rbac.clientRole.bindings": bindings})
    subjects = sorted((d["metadata"]["namespace"], s["kind"], s["name"]) for d in docs
                      if d["kind"] == "RoleBinding" and d["roleRef"]["name"].endswith("-client")
                      for s in d["subjects"])
    assert subjects == [("team-a", "ServiceAccount", "ctl"), ("team-a", "User", "alice@example.com"),
                        ("team-b", "Group", "ml-researchers")]


def test_meshes_join_the_default_edit_and_view_roles(cluster):
    docs = support.render(cluster, "ha.yaml")
    aggregated = {d["metadata"]["name"].rsplit("-", 1)[1]: d for d in docs
                  if d["kind"] == "ClusterRole" and _aggregated(d)}
    assert set(aggregated) == {"edit", "view"}
    assert aggregated["view"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert {v for r in aggregated["view"]["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    assert not [r for d in aggregated.values() for r in d["rules"] if "secrets" in r["resources"]]
    assert not [d for d in support.render(cluster, "ha.yaml", sets={"rbac.aggregateToDefaultRoles": False})
                if d["kind"] == "ClusterRole" and _aggregated(d)]


def _client_grants(docs: list[dict]) -> set[tuple[str, str]]:
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-client")]
    return {(res, verb) for r in role["rules"] for res in r["resources"] for verb in r["verbs"]}


def test_client_role_reads_no_secret_and_creates_pods_and_secrets_only_together(cluster):
    plain = _client_grants(support.render(cluster, "ha.yaml"))
    assert not {g for g in plain if g[0] == "secrets"}
    assert ("pods", "create") not in plain and ("pods/portforward", "create") in plain
    creating = _client_grants(support.render(cluster, "ha.yaml",
                                             sets={"rbac.clientRole.createMeshes": True}))
    assert creating - plain == {("pods", "create"), ("secrets", "create")}


def test_admission_policy_is_on_by_default(cluster):
    docs = support.render(cluster)
    kinds = [d["kind"] for d in docs]
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= set(kinds)
    fixed = [d for d in docs if d["metadata"]["name"] == f"{support.FULLNAME}-queue-name-fixed"]
    assert sorted(d["kind"] for d in fixed) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "procmesh" for d in fixed)
    kinds = [d["kind"] for d in support.render(cluster, sets={"admissionPolicy.enabled": False})]
    assert "ValidatingAdmissionPolicy" not in kinds


def test_restart_backoff_values_reach_the_operator_flags(cluster):
    args = _container(support.render(cluster))["args"]
    for flag in ("--restart-backoff-seconds=10", "--restart-backoff-max-seconds=300",
                 "--restart-backoff-reset-seconds=600"):
        assert flag in args, args
    args = _container(support.render(cluster, sets={"operator.restartBackoff.seconds": 0.5,
                                                    "operator.restartBackoff.maxSeconds": 0}))["args"]
    assert "--restart-backoff-seconds=0.5" in args and "--restart-backoff-max-seconds=0" in args, args


def test_notes_grant_a_mesh_with_a_binding_that_goes_with_it(cluster):
    """The install's notes show how to let a user use one mesh: ``procmesh grant``, whose binding
    the mesh owns, not a plain RoleBinding, which outlives the mesh and would grant a later mesh
    of the same name (README, "Access and threat model")."""
    out = support.helm(cluster, "install", "notes-check", str(support.CHART), "-n", "notes-check",
                       "--dry-run=client", "--set", "crds.install=false").stdout
    notes = out[out.index("NOTES:"):]
    assert "procmesh grant cpu-mesh --user=alice" in notes, notes
    assert "kubectl create rolebinding" not in notes, notes
