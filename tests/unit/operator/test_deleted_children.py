"""Children deleted under a running mesh, in the controller against the fake API of
test_reconciling.py (the real control plane: tests/integration/operator/test_deleted_children.py).

Aspects:
- a proc replaced after its mesh's Service and Role were deleted brings them back in that
  reconcile, with a Warning event; a healthy mesh's reconciles ask nothing about its children;
- the child watch (childwatch.py): a deletion of this incarnation's Service or Role reconciles
  the mesh, which creates it again with a Warning event, also while every pod is being replaced;
  a child missing from the watch's list counts as deleted; another incarnation's child, a
  user's look-alike and events other than a deletion change nothing; a deletion that lands
  while the child is being checked is not lost;
- garbage collection after the mesh's deletion (background: gone; foreground: deletionTimestamp),
  seen before the mesh's own watch event: neither its children nor its procs are created again
  (the mesh is read fresh first); the operator's own pod deletes cost no such read;
- a token Secret deleted under running procs: the replaced proc's reconcile finds it gone with a
  dry-run create (never a read, never a new token under running procs) and the status says so
  (Degraded and Ready, TokenSecretMissing, with what to do); the report stands while the Secret
  is gone, also for a new operator process, and a suspend and resume clears it (the Secret made
  again, with a new token, before any pod);
- a creator's own Secret (spec.tokenSecretName) is reported with the creator's way out;
- an API server that will not answer the dry run concludes nothing.
"""

import asyncio
import copy

import pytest

from mesh_client._src import contract
from procmesh_operator import childwatch, kubeclient, reconciling

from .builders import mesh_body
from .test_reconciling import (
    MESH_PATH,
    ROLES,
    FakeClient,
    controller,
    creates,
    edit_mesh,
    run_pods,
    secret_path,
    secret_reads,
)

SERVICE = kubeclient.core_path("ns", "services", "m-procs")
ROLE = f"{ROLES}/m-procmesh-access"


def condition(client, type_):
    return next(c for c in client.objects[MESH_PATH]["status"]["conditions"]
                if c["type"] == type_)


def running_mesh(policy="RestartProc", **spec):
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                   restartPolicy=policy, **spec)})
    asyncio.run(ctl.reconcile(("ns", "m")))
    run_pods(ctl, client, ["m-0", "m-1"])
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["phase"] == "Ready"
    return ctl, client


def replace_proc(ctl, client, name="m-1"):
    """The proc fails; one reconcile deletes its pod, the next creates it again."""
    body = client.objects[kubeclient.pods_path("ns", name)]
    body["status"] = {"phase": "Failed"}
    client._stamp(body)
    ctl.pod_event("MODIFIED", copy.deepcopy(body))
    asyncio.run(ctl.reconcile(("ns", "m")))
    gone = client.objects.pop(kubeclient.pods_path("ns", name), None) or body
    ctl.pod_event("DELETED", gone)
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert kubeclient.pods_path("ns", name) in client.objects


def warnings(client):
    return [p for verb, p in client.calls if verb == "create" and p.endswith("/events")]


def test_a_replaced_proc_brings_back_the_deleted_service_and_role():
    ctl, client = running_mesh()
    del client.objects[SERVICE], client.objects[ROLE]
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))  # a healthy mesh: its children are not asked about
    assert client.calls == []
    replace_proc(ctl, client)
    assert SERVICE in client.objects and ROLE in client.objects
    assert creates(client) == [kubeclient.pods_path("ns"), ROLES,
                               "/api/v1/namespaces/ns/services"]
    assert len(warnings(client)) >= 2  # ChildRecreated, one per child (then the proc's events)


def recreated(client):
    """The children named by ChildRecreated events (kind and name)."""
    return sorted(" ".join(e["message"].split()[:2]) for p, e in client.objects.items()
                  if "/events/" in p and e.get("reason") == reconciling.CHILD_RECREATED)


def deleted(ctl, client, path, kind):
    """The object at ``path`` is deleted; the child watch delivers it (projected) to ``ctl``."""
    ctl.child_event(kind, "DELETED", childwatch.slim_child(client.objects.pop(path)))


def test_a_watched_deletion_of_a_child_brings_it_back_at_once():
    ctl, client = running_mesh()
    queued = []
    ctl.enqueue = lambda key, delay=0.0: queued.append(key)
    deleted(ctl, client, SERVICE, childwatch.SERVICE)
    deleted(ctl, client, ROLE, childwatch.ROLE)
    assert queued == [("ns", "m"), ("ns", "m")]
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert SERVICE in client.objects and ROLE in client.objects
    assert creates(client) == [ROLES, "/api/v1/namespaces/ns/services"]
    assert recreated(client) == ["Role m-procmesh-access", "Service m-procs"]
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.calls == []  # ensured again: nothing more is asked


def test_a_child_deleted_while_every_pod_is_replaced_is_recreated_with_a_warning():
    ctl, client = running_mesh()
    for path in [p for p in client.objects if "/pods/" in p]:
        ctl.pod_event("DELETED", client.objects.pop(path))
    deleted(ctl, client, SERVICE, childwatch.SERVICE)
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert SERVICE in client.objects
    assert recreated(client) == ["Service m-procs"]  # the mesh had run: not taken for a new one


def test_a_child_missing_from_the_watch_list_counts_as_deleted():
    ctl, client = running_mesh()
    queued = []
    ctl.enqueue = lambda key, delay=0.0: queued.append(key)
    role = childwatch.slim_child(client.objects[ROLE])
    client.objects.pop(SERVICE)
    ctl.children_listed(childwatch.SERVICE, "ns", [], "99")
    ctl.children_listed(childwatch.ROLE, "ns", [role], "99")
    ctl.children_listed(childwatch.ROLE, "other", [], "99")  # another namespace's list
    assert queued == [("ns", "m")]
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == ["/api/v1/namespaces/ns/services"]


def test_only_a_deletion_of_this_incarnations_child_counts():
    ctl, client = running_mesh()
    service = childwatch.slim_child(client.objects[SERVICE])
    ctl.child_event(childwatch.SERVICE, "MODIFIED", service)
    ctl.child_event(childwatch.SERVICE, None, service)
    earlier = copy.deepcopy(service)
    earlier["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-incarnation"
    ctl.child_event(childwatch.SERVICE, "DELETED", earlier)
    unowned = copy.deepcopy(service)
    del unowned["metadata"]["ownerReferences"]
    ctl.child_event(childwatch.SERVICE, "DELETED", unowned)
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == [] and recreated(client) == []  # the Service is this mesh's, there
    queued = []
    ctl.enqueue = lambda key, delay=0.0: queued.append(key)
    ctl.child_event(childwatch.SERVICE, "DELETED", service)
    assert queued == [("ns", "m")]


def gone_or_deleting(client, foreground):
    """The mesh deleted in the API (background: gone; foreground: deletionTimestamp set), its
    own watch event not delivered yet (kopf batches it): the controller holds the live body."""
    if foreground:
        client.objects[MESH_PATH]["metadata"]["deletionTimestamp"] = "2026-12-06T22:00:00Z"
    else:
        del client.objects[MESH_PATH]


@pytest.mark.parametrize("foreground", [False, True])
def test_children_collected_with_their_mesh_are_not_created_again(foreground):
    ctl, client = running_mesh()
    gone_or_deleting(client, foreground)
    deleted(ctl, client, SERVICE, childwatch.SERVICE)  # garbage collection, at once
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert ("get", MESH_PATH) in client.calls  # read fresh, not from the body held
    assert creates(client) == [] and recreated(client) == []


@pytest.mark.parametrize("foreground", [False, True])
def test_procs_collected_with_their_mesh_are_not_created_again(foreground):
    ctl, client = running_mesh()  # RestartProc: a proc pod deleted under it is replaced
    gone_or_deleting(client, foreground)
    pod = client.objects[kubeclient.pods_path("ns", "m-1")]
    pod["metadata"]["deletionTimestamp"] = "2026-12-06T22:00:00Z"  # garbage collection's
    client._stamp(pod)
    ctl.pod_event("MODIFIED", copy.deepcopy(pod))
    ctl.pod_event("DELETED", client.objects.pop(kubeclient.pods_path("ns", "m-1")))
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == []
    # A later event of a pod still there (no deletion: no news) must not bring the body held
    # back into use before the mesh's own watch event arrives.
    other = client.objects[kubeclient.pods_path("ns", "m-0")]
    client._stamp(other)
    ctl.pod_event("MODIFIED", copy.deepcopy(other))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == []


@pytest.mark.parametrize("foreground", [False, True])
def test_procs_collected_unseen_are_not_created_again_after_a_relist(foreground):
    # The pod watch was down while the mesh and its pods went; its next list repairs the cache.
    ctl, client = running_mesh()
    gone_or_deleting(client, foreground)
    for path in [p for p in client.objects if "/pods/" in p]:
        del client.objects[path]
    ctl.pods_listed("ns", [], str(client.rv + 1))  # a list newer than every pod it lacks
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == []


def test_a_watch_event_ahead_of_its_delete_response_loses_no_event():
    # The operator's own delete of a failed proc's pod: the watch tells of it (terminating)
    # before the delete's response arrives, so it is news and the mesh is to be read fresh; the
    # reconcile in flight still writes its status on its own earlier write and posts its events
    # (with the body dropped, its last write fell back to the body read before the first one,
    # was refused as superseded, and the ProcFailed event was lost).
    ctl, client = running_mesh()
    path = kubeclient.pods_path("ns", "m-1")
    body = client.objects[path]
    body["status"] = {"phase": "Failed"}
    client._stamp(body)
    ctl.pod_event("MODIFIED", copy.deepcopy(body))
    delete = client.delete

    async def watch_first(pod_path, **kwargs):
        if pod_path == path:
            seen = copy.deepcopy(client.objects[path])
            seen["metadata"]["deletionTimestamp"] = "2026-12-06T22:00:00Z"
            ctl.pod_event("MODIFIED", seen)
        return await delete(pod_path, **kwargs)

    client.delete = watch_first
    asyncio.run(ctl.reconcile(("ns", "m")))
    reasons = [e.get("reason") for p, e in client.objects.items() if "/events/" in p]
    assert "ProcFailed" in reasons
    assert client.objects[MESH_PATH]["status"]["restarts"] == 1
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert ("get", MESH_PATH) in client.calls  # and the next reconcile reads the mesh fresh


def test_a_delete_of_the_operators_own_is_no_news():
    ctl, client = running_mesh()
    queued = []
    ctl.enqueue = lambda key, delay=0.0: queued.append(key)
    replace_proc(ctl, client)  # the operator deletes the failed proc's pod and creates it again
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert ("get", MESH_PATH) not in client.calls  # its own deletes cost no read of the mesh


def test_a_deletion_while_the_child_is_checked_is_not_lost():
    ctl, client = running_mesh()
    # The periodic check reads the Service; it is deleted while that read is in flight.
    ctl._ensured.pop((("ns", "m"), "Service"))
    read = client.get_or_none

    async def read_then_deleted(path):
        found = await read(path)
        if path == SERVICE:
            deleted(ctl, client, SERVICE, childwatch.SERVICE)
        return found

    client.get_or_none = read_then_deleted
    asyncio.run(ctl.reconcile(("ns", "m")))  # its read said "there": not taken for the truth
    client.get_or_none = read
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert SERVICE in client.objects and recreated(client) == ["Service m-procs"]


def test_a_deletion_of_an_earlier_incarnations_child_gives_no_warning():
    ctl, client = running_mesh()
    old = childwatch.slim_child(client.objects[SERVICE])
    old["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-incarnation"
    ctl.child_event(childwatch.SERVICE, "DELETED", old)
    del client.objects[SERVICE]  # this incarnation's, gone with no word yet
    ctl._ensured.pop((("ns", "m"), "Service"))  # as at the periodic check
    for path in [p for p in client.objects if "/pods/" in p]:  # no pods: taken for new
        ctl.pod_event("DELETED", client.objects.pop(path))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert SERVICE in client.objects and recreated(client) == []


def test_the_child_watch_paths_and_projection():
    assert childwatch.paths(None) == {"Service": "/api/v1/services",
                                      "Role": "/apis/rbac.authorization.k8s.io/v1/roles"}
    assert childwatch.paths("ns") == {"Service": "/api/v1/namespaces/ns/services", "Role": ROLES}
    assert childwatch.SELECTOR == "procmesh.io/mesh,app.kubernetes.io/managed-by=procmesh-operator"
    slim = childwatch.slim_child({"metadata": {"name": "m-procs", "namespace": "ns",
                                               "labels": {contract.MESH_LABEL: "m"},
                                               "managedFields": [{}],
                                               "ownerReferences": [{"kind": contract.KIND,
                                                                    "name": "m", "uid": "u1"}]},
                                  "spec": {"clusterIP": "None"}})
    assert set(slim) == {"metadata"} and "managedFields" not in slim["metadata"]
    assert childwatch.owner(slim) == (("ns", "m"), "u1")
    slim["metadata"]["ownerReferences"][0]["name"] = "another-mesh"
    assert childwatch.owner(slim) is None


def test_a_secret_deleted_under_running_procs_is_reported_when_a_proc_is_replaced():
    ctl, client = running_mesh()
    secret = client.objects[MESH_PATH]["status"]["tokenSecretName"]
    token = client.objects.pop(secret_path(secret))["data"]["token"]
    replace_proc(ctl, client)
    assert ("dry-run create", "/api/v1/namespaces/ns/secrets") in client.calls
    assert secret_path(secret) not in client.objects  # no new token under running procs
    assert secret_reads(client) == []
    degraded, ready = condition(client, "Degraded"), condition(client, "Ready")
    assert (degraded["status"], degraded["reason"]) == ("True", contract.TOKEN_SECRET_MISSING)
    assert (ready["status"], ready["reason"]) == ("False", contract.TOKEN_SECRET_MISSING)
    assert degraded["message"].startswith(f"the token Secret {secret} was deleted while the "
                                          f"mesh has procs")
    assert "Suspend the mesh and resume it" in degraded["message"]
    assert ready["message"].startswith("1 of 2 procs ready; the token Secret")
    assert client.objects[MESH_PATH]["status"]["phase"] == "Failed"

    # It stands while the Secret is gone, for this process and for a new one.
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert condition(client, "Degraded")["reason"] == contract.TOKEN_SECRET_MISSING
    fresh, _ = controller({})
    fresh.client = client
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert condition(client, "Degraded")["reason"] == contract.TOKEN_SECRET_MISSING

    # The way out the message gives: suspend (the pods go), resume.
    edit_mesh(fresh, client, MESH_PATH, lambda m: m["spec"].update(suspend=True))
    asyncio.run(fresh.reconcile(("ns", "m")))
    for path in [p for p in client.objects if "/pods/" in p]:
        fresh.pod_event("DELETED", client.objects.pop(path))
    asyncio.run(fresh.reconcile(("ns", "m")))
    edit_mesh(fresh, client, MESH_PATH, lambda m: m["spec"].update(suspend=False))
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert client.objects[secret_path(secret)]["data"]["token"] != token
    assert condition(client, "Degraded")["reason"] == "NoFailures"
    run_pods(fresh, client, ["m-0", "m-1"])
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["phase"] == "Ready"


def test_a_secret_back_under_its_name_clears_the_report():
    ctl, client = running_mesh()
    secret = client.objects[MESH_PATH]["status"]["tokenSecretName"]
    kept = client.objects.pop(secret_path(secret))
    replace_proc(ctl, client)
    assert condition(client, "Degraded")["reason"] == contract.TOKEN_SECRET_MISSING
    client.objects[secret_path(secret)] = kept  # whoever deleted it put it back
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert condition(client, "Degraded")["reason"] == "NoFailures"
    assert condition(client, "Ready")["reason"] != contract.TOKEN_SECRET_MISSING


def test_a_creators_own_secret_is_reported_with_the_creators_way_out():
    ctl, client = running_mesh(tokenSecretName="m-token-0123abcd")
    replace_proc(ctl, client)  # the creator never made that Secret here: it is missing
    message = condition(client, "Degraded")["message"]
    assert message.startswith("the token Secret m-token-0123abcd was deleted")
    assert "spec.tokenSecretName, which the operator never creates" in message
    assert not [p for p in creates(client) if "/secrets" in p]


class NoDryRunClient(FakeClient):
    """An admission webhook that does not support dry runs refuses them (400)."""

    async def create(self, path, body, *, dry_run=False):
        if dry_run:
            self.calls.append(("dry-run create", path))
            raise kubeclient.ApiError(400, "BadRequest", "admission webhook does not support "
                                                         "dry run")
        return await super().create(path, body)


def test_a_dry_run_the_api_server_refuses_concludes_nothing():
    client = NoDryRunClient({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                  restartPolicy="RestartProc")})
    ctl = reconciling.Controller(client, controller({})[0].settings)
    asyncio.run(ctl.reconcile(("ns", "m")))
    run_pods(ctl, client, ["m-0", "m-1"])
    secret = client.objects[MESH_PATH]["status"]["tokenSecretName"]
    del client.objects[secret_path(secret)]
    replace_proc(ctl, client)
    assert ("dry-run create", "/api/v1/namespaces/ns/secrets") in client.calls
    assert condition(client, "Degraded")["reason"] == "NoFailures"
