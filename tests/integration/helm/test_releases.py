"""Two releases of the chart in one cluster, each with namespaces of its own to watch.

The first release installs the CRD; the second (another release name, in another namespace) has
`crds.install=false`. The tests share both releases (module fixture) and run in file order.

Aspects:
- the second release installs beside the first, and each operator reconciles the meshes of its
  own namespace and touches none of the other's: every Event of a mesh comes from its own
  release's operator, and neither operator's log has a refused request;
- a third release in the first one's namespace leads on a Lease of its own
  (`leaderElection.leaseName: ""`) while the first keeps leading on its own;
- what would make two operators fight over meshes, or leave one idle, fails the install with a
  message that names the value: a watched namespace in common, watching every namespace, one
  Lease for two releases of one namespace (the chart looks the other releases up).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.cluster import testing
from tests.integration.helm import support
from tests.integration.operator.support import create_mesh, events, kubectl, wait_ready

pytestmark = pytest.mark.cluster

#: (release, its namespace, the one namespace it watches)
FIRST = (support.RELEASE, support.RELEASE_NAMESPACE, "team-a")
SECOND = ("procmesh-b", "procmesh-b-system", "team-b")
THIRD = ("procmesh-c", support.RELEASE_NAMESPACE, "team-c")  # beside the first


def watching(namespace: str, **extra: Any) -> dict[str, Any]:
    return {"watch.allNamespaces": False, "watch.namespaces": [namespace], **extra}


def delete_meshes(cluster: Any, namespace: str) -> None:
    kubectl(cluster, "delete", "procmeshes", "--all", "-n", namespace, "--wait=true", check=False)


@pytest.fixture(scope="module")
def releases(cluster, namespaces, core):
    try:
        support.install(cluster, sets=watching(FIRST[2]))
        release, namespace, watched = SECOND
        support.install(cluster, release=release, namespace=namespace,
                        sets=watching(watched, **{"crds.install": False}))
        yield {release: support.wait_operator_running(core, release=release, namespace=namespace)
               for release, namespace, _ in (FIRST, SECOND)}
    finally:
        for release, namespace, watched in (SECOND, FIRST):
            delete_meshes(cluster, watched)
            support.uninstall(cluster, release=release, namespace=namespace)


def test_each_release_reconciles_only_its_own_namespace(cluster, releases, core, custom):
    for _, _, watched in (FIRST, SECOND):
        create_mesh(custom, watched, "mine", perHost=[{"name": "procs", "size": 2}])
    for release, _, watched in (FIRST, SECOND):
        mesh = wait_ready(custom, watched, "mine")
        assert [p["ready"] for p in mesh["status"]["procs"]] == [True, True]
        # The operator posts MeshReady after the status write that made the mesh Ready.
        testing.wait_for(lambda ns=watched: any(e.reason == "MeshReady"
                                                for e in events(core, ns, "mine")),
                         f"a MeshReady event in {watched}")
        [pod] = releases[release]
        reporters = {e.reporting_instance for e in events(core, watched, "mine")}
        assert reporters == {pod.metadata.name}, (watched, reporters)
    for release, namespace, _ in (FIRST, SECOND):
        [pod] = releases[release]
        assert not support.forbidden_messages(cluster, pod.metadata.name, namespace), release


def test_a_release_beside_another_in_its_namespace_leads_on_a_lease_of_its_own(
        cluster, releases, core, custom):
    release, namespace, watched = THIRD
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=watched)))
    try:
        support.install(cluster, release=release, namespace=namespace,
                        sets=watching(watched, **{"crds.install": False,
                                                  "leaderElection.leaseName": ""}))
        [pod] = support.wait_operator_running(core, release=release, namespace=namespace)
        [first] = releases[FIRST[0]]
        leases = client.CoordinationV1Api(core.api_client)

        def holders() -> dict[str, str] | None:
            found = {lease.metadata.name: lease.spec.holder_identity
                     for lease in leases.list_namespaced_lease(namespace).items}
            expected = {"procmesh-operator": first.metadata.name,
                        f"{release}-procmesh-operator": pod.metadata.name}
            return found if expected.items() <= found.items() else None

        testing.wait_for(holders, "each release holding a Lease of its own")
        create_mesh(custom, watched, "mine")
        wait_ready(custom, watched, "mine")
        assert {e.reporting_instance for e in events(core, watched, "mine")} == {pod.metadata.name}
    finally:
        delete_meshes(cluster, watched)
        support.uninstall(cluster, release=release, namespace=namespace)
        core.delete_namespace(watched)


@pytest.mark.parametrize("namespace,sets,message", [
    ("procmesh-d-system", watching("team-b"),
     "watch.namespaces has team-b, which release procmesh-b in namespace procmesh-b-system "
     "watches too"),
    ("procmesh-d-system", {"watch.allNamespaces": True},
     "watch.allNamespaces is true but release"),
    (support.RELEASE_NAMESPACE, watching("team-d"),
     "release procmesh in namespace procmesh-system uses the Lease procmesh-operator of this "
     "namespace"),
], ids=["namespace-in-common", "all-namespaces", "one-lease"])
def test_a_release_that_would_fight_another_fails_naming_the_value(cluster, releases, namespace,
                                                                    sets, message):
    # A server-side dry run renders with lookups against the cluster, and creates nothing.
    with pytest.raises(AssertionError) as failed:
        support.install(cluster, command="install", release="procmesh-d", namespace=namespace,
                        sets={"crds.install": False, **sets}, extra=["--dry-run=server"])
    assert message in str(failed.value)


def test_the_check_of_other_releases_can_be_turned_off(cluster, releases):
    # For an installer who may not list Deployments cluster-wide (lookup would be forbidden):
    # what the check refuses (a namespace and a Lease in common) then passes the dry run.
    sets = {"crds.install": False, **watching("team-b")}
    with pytest.raises(AssertionError):
        support.install(cluster, command="install", release="procmesh-d",
                        sets=sets, extra=["--dry-run=server"])
    support.install(cluster, command="install", release="procmesh-d",
                    sets={**sets, "watch.checkOtherReleases": False}, extra=["--dry-run=server"])
