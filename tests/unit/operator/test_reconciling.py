"""The ordered reconcile against a fake of our own API wrapper (kubeclient.KubeClient), as kopf's
tests do: the raw HTTP layer is never reached.

Aspects: secret -> access role -> service -> pods order; a second reconcile creates nothing
(idempotent); a 409 on create (an earlier run's pod) is taken as done; the token Secret is never
replaced and never read (its name, crash windows and planted Secrets: test_token_secrets.py); a
creator's own Secret (spec.tokenSecretName) is left alone; a foreign Role of the derived name is
a conflict;
status is written only when it changed; an API error is recorded as Degraded and re-raised;
a relist repairs a pod cache that missed a deletion; a mesh created again at once under the
same name is not Ready on the earlier mesh's pods and waits for them to go.
"""

import asyncio
import copy
import dataclasses

import pytest

from mesh_client._src import contract
from procmesh_operator import create_refusals, kubeclient, queueing, reconciling

from .builders import SETTINGS, mesh, mesh_body, pod


def generated(number):
    """Five characters of the API server's generateName alphabet, from ``number``."""
    alphabet = sorted(contract.GENERATED_SUFFIX_ALPHABET)
    out = ""
    for _ in range(contract.GENERATED_SUFFIX_LENGTH):
        number, digit = divmod(number, len(alphabet))
        out = alphabet[digit] + out
    return out


class FakeClient:
    """An in-memory API server for the paths the controller uses."""

    def __init__(self, objects):
        self.objects = {k: copy.deepcopy(v) for k, v in objects.items()}
        self.calls = []
        self.fail_on = None
        self.rv = 100

    def _stamp(self, body):
        self.rv += 1
        body.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        body["metadata"].setdefault("uid", f"uid-{self.rv}")
        return body

    async def get_or_none(self, path):
        self.calls.append(("get", path))
        return copy.deepcopy(self.objects.get(path))

    async def get(self, path):
        found = await self.get_or_none(path)
        if found is None:
            raise kubeclient.ApiError(404, "NotFound", path)
        return found

    async def list(self, path, *, label_selector=None):
        self.calls.append(("list", path))
        key, _, value = (label_selector or "").partition("=")
        items = [copy.deepcopy(o) for p, o in self.objects.items()
                 if p.startswith(path + "/") and (not key or
                                                  (o["metadata"].get("labels") or {}).get(key)
                                                  == (value or
                                                      (o["metadata"].get("labels") or {}).get(key)))]
        return {"metadata": {"resourceVersion": str(self.rv)}, "items": items}

    async def list_paged(self, path, *, label_selector=None, page_size=500, transform=None):
        listed = await self.list(path, label_selector=label_selector)
        listed["items"] = [transform(i) if transform else i for i in listed["items"]]
        return listed

    async def create(self, path, body, *, dry_run=False):
        self.calls.append(("dry-run create" if dry_run else "create", path))
        if self.fail_on == "create":
            raise kubeclient.ApiError(500, "InternalError", "boom")
        # generateName: the API server appends 5 random characters of its alphabet (here:
        # the next version, in that alphabet).
        name = body["metadata"].get("name") or body["metadata"]["generateName"] + generated(self.rv)
        target = f"{path}/{name}"
        if target in self.objects:
            raise kubeclient.ApiError(409, "AlreadyExists", target)
        if dry_run:
            return copy.deepcopy(dict(body))
        stored = copy.deepcopy(dict(body))
        stored["metadata"]["name"] = name
        stored["metadata"].pop("generateName", None)
        self.objects[target] = self._stamp(stored)
        return copy.deepcopy(self.objects[target])

    async def merge_patch(self, path, body):
        self.calls.append(("patch", path))
        target = path.removesuffix("/status")
        if target not in self.objects:
            raise kubeclient.ApiError(404, "NotFound", target)
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != self.objects[target]["metadata"]["resourceVersion"]:
            raise kubeclient.ApiError(409, "Conflict", "the object has been modified")
        if path.endswith("/status"):  # a merge patch of the status: None deletes a field
            status = self.objects[target].setdefault("status", {})
            for field, value in body["status"].items():
                if value is None:
                    status.pop(field, None)
                else:
                    status[field] = copy.deepcopy(value)
        else:  # a pod's spec (the gang gate), or its annotations (a restart's count):
            # one level of merge, None deletes; a uid is a precondition
            meta = self.objects[target]["metadata"]
            uid = (body.get("metadata") or {}).get("uid")
            if uid is not None and uid != meta.get("uid"):
                raise kubeclient.ApiError(409, "Conflict", "Precondition failed: UID")
            for into, given in ((self.objects[target].setdefault("spec", {}), body.get("spec")),
                                (meta.setdefault("annotations", {}),
                                 (body.get("metadata") or {}).get("annotations"))):
                for field, value in (given or {}).items():
                    if value is None:
                        into.pop(field, None)
                    else:
                        into[field] = copy.deepcopy(value)
        return copy.deepcopy(self._stamp(self.objects[target]))

    async def delete(self, path, *, uid=None, grace_period_seconds=None):
        self.calls.append(("delete", path))
        return copy.deepcopy(self.objects.pop(path, None))

    async def close(self):
        pass


MESH_PATH = kubeclient.mesh_path("ns", "m")
ROLES = kubeclient.roles_path("ns")


#: The behaviour without gang placement; tests/unit/operator/test_ganging_reconcile.py has it on.
NO_GANG = dataclasses.replace(SETTINGS, gang="off")


def controller(objects, settings=NO_GANG):
    client = FakeClient(objects)
    return reconciling.Controller(client, settings), client


def edit_mesh(ctl, client, path, change):
    """Change the stored mesh as a user would, and deliver its watch event (the controller
    reads meshes from their events, not with a GET per reconcile)."""
    change(client.objects[path])
    client._stamp(client.objects[path])
    ctl.mesh_event("MODIFIED", copy.deepcopy(client.objects[path]))


def secret_path(name):
    return kubeclient.core_path("ns", "secrets", name)


def creates(client):
    return [p for verb, p in client.calls if verb == "create" and "/events" not in p]


def test_order_and_idempotence():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == ["/api/v1/namespaces/ns/secrets", ROLES,
                               "/api/v1/namespaces/ns/services",
                               "/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods"]
    secret = secret_path(client.objects[MESH_PATH]["status"]["tokenSecretName"])
    token = client.objects[secret]["data"]["token"]
    status = client.objects[MESH_PATH]["status"]
    assert status["desiredProcs"] == 2 and status["phase"] == "Progressing"
    client.calls.clear()
    ctl._ensured.clear()  # as after a resync period: the children are checked again
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == []  # the mesh has pods, so its Secret exists
    assert not [c for c in client.calls if c[0] == "patch"]  # nothing changed: no write
    assert client.objects[secret]["data"]["token"] == token


def test_restarted_operator_adopts_existing_pods():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    fresh, _ = controller({})
    fresh.client = client  # a new process: empty cache, same cluster
    client.calls.clear()
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert creates(client) == []


def test_create_conflict_is_done():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.store._primed.add(("ns", "m"))  # a stale cache that has not seen m-0 yet
    client.objects["/api/v1/namespaces/ns/pods/m-0"] = {
        "metadata": {"name": "m-0", "namespace": "ns", "uid": "old", "resourceVersion": "5",
                     "labels": {"procmesh.io/mesh": "m"},
                     "ownerReferences": [{"uid": "uid-m", "controller": True}]},
        "spec": {}, "status": {}}
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert ctl.store.pods_by_rank(("ns", "m"), "uid-m")[0]["metadata"]["uid"] == "old"


def secret_reads(client):
    return [p for verb, p in client.calls if verb in ("get", "list") and "/secrets" in p]


def test_existing_secret_of_this_mesh_is_done_without_reading_it():
    # An earlier run created the Secret and the Role (which comes after it), then stopped.
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    for path in [p for p in client.objects if "/pods/" in p]:
        del client.objects[path]
    fresh, _ = controller({})
    fresh.client = client
    client.calls.clear()
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert secret_reads(client) == [] and [p for p in creates(client) if p.endswith("/pods")]


def test_creators_secret_is_named_in_pods_and_role_and_never_created():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),),
                                                   tokenSecretName="m-token-abc")})
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert "/api/v1/namespaces/ns/secrets" not in creates(client) and secret_reads(client) == []
    pod = client.objects["/api/v1/namespaces/ns/pods/m-0"]
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "m-token-abc"
    role = client.objects[f"{ROLES}/m-procmesh-access"]
    assert role["rules"][1]["resourceNames"] == ["m-token-abc"]


def test_foreign_role_is_a_conflict():
    ctl, client = controller({
        MESH_PATH: mesh_body("m"),
        f"{ROLES}/m-procmesh-access": {"metadata": {"name": "m-procmesh-access"}, "rules": []}})
    with pytest.raises(reconciling.ChildConflict):
        asyncio.run(ctl.reconcile(("ns", "m")))
    degraded = [c for c in client.objects[MESH_PATH]["status"]["conditions"]
                if c["type"] == "Degraded"][0]
    assert degraded["reason"] == "ReconcileError" and "not owned" in degraded["message"]
    assert not [p for p in creates(client) if p.endswith("/pods")]


def test_api_error_is_recorded_and_raised():
    ctl, client = controller({MESH_PATH: mesh_body("m")})
    client.fail_on = "create"
    with pytest.raises(kubeclient.ApiError):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["phase"] == "Degraded"


def test_an_unanswered_request_is_recorded_and_raised():
    ctl, client = controller({MESH_PATH: mesh_body("m")})

    async def unanswered(path, body):
        raise kubeclient.Unanswered(f"POST {path}: the API server did not answer within 60 s")

    client.create = unanswered
    with pytest.raises(kubeclient.Unanswered):
        asyncio.run(ctl.reconcile(("ns", "m")))
    status = client.objects[MESH_PATH]["status"]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert status["phase"] == "Degraded" and degraded["reason"] == "ReconcileError"
    assert "did not answer within 60 s" in degraded["message"]


def test_deleted_mesh_is_forgotten():
    ctl, client = controller({})
    assert asyncio.run(ctl.reconcile(("ns", "gone"))) is None
    assert creates(client) == []


def test_suspended_mesh_without_its_secret_gets_a_new_token():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    path = secret_path(client.objects[MESH_PATH]["status"]["tokenSecretName"])
    before = client.objects.pop(path)["data"]["token"]  # deleted while running: not recreated
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert path not in client.objects
    edit_mesh(ctl, client, MESH_PATH, lambda m: m["spec"].update(suspend=True))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert not ctl.store.pods_by_rank(("ns", "m"), "uid-m")
    edit_mesh(ctl, client, MESH_PATH, lambda m: m["spec"].update(suspend=False))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[path]["data"]["token"] != before
    assert ctl.store.pods_by_rank(("ns", "m"), "uid-m")


def test_relist_repairs_a_missed_deletion():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    del client.objects["/api/v1/namespaces/ns/pods/m-1"]  # deleted; the watch never said so
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == []  # the cache still believes in m-1
    assert asyncio.run(ctl.relist()) == {("ns", "m")}
    assert [c for c in client.calls if c[0] == "list"] == [("list", "/api/v1/namespaces/ns/pods")]
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == ["/api/v1/namespaces/ns/pods"]


class DeletedFirstClient(FakeClient):
    """The API server deletes a Failed pod at once: the watch's DELETED event is handled before
    the DELETE response (carrying deletionTimestamp, an older resourceVersion) comes back."""

    controller = None

    async def delete(self, path, *, uid=None, grace_period_seconds=None):
        self.calls.append(("delete", path))
        body = self.objects.pop(path, None)
        if body is None:
            return None
        response = copy.deepcopy(body)
        response["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self._stamp(response)
        gone = copy.deepcopy(response)
        self._stamp(gone)
        self.controller.pod_event("DELETED", gone)
        return response


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_restart_completes_when_deleted_event_beats_delete_response(policy):
    """Issue 12 item 1, in the controller: the restart must not stall on a resurrected pod."""
    client = DeletedFirstClient({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                      restartPolicy=policy)})
    ctl = reconciling.Controller(client, SETTINGS)
    client.controller = ctl
    asyncio.run(ctl.reconcile(("ns", "m")))
    failed = client.objects["/api/v1/namespaces/ns/pods/m-1"]
    failed["status"] = {"phase": "Failed"}
    client._stamp(failed)
    ctl.pod_event("MODIFIED", copy.deepcopy(failed))
    asyncio.run(ctl.reconcile(("ns", "m")))  # deletes (the failed pod, or all of them)
    assert [c for c in client.calls if c[0] == "delete"]
    assert ctl.store.pods_by_rank(("ns", "m"), "uid-m").keys() == ({0} if policy == "RestartProc" else set())
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))  # recreates
    recreated = 1 if policy == "RestartProc" else 2
    # (RestartMesh leaves no pod: the operator may try the token Secret again, a 409 at most)
    assert [c for c in creates(client) if c.endswith("/pods")] == ["/api/v1/namespaces/ns/pods"] * recreated
    assert sorted(ctl.store.pods_by_rank(("ns", "m"), "uid-m")) == [0, 1]


def test_restart_mesh_deletes_the_counted_failed_pod_last():
    """An operator that dies in the middle of a RestartMesh's deletes must leave the failed pod
    (marked with the count) rather than its healthy peers: a marked pod still there makes the
    next run finish the restart; with it gone first, the peers left ran on beside fresh ranks."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 3),),
                                                   restartPolicy="RestartMesh")})
    asyncio.run(ctl.reconcile(("ns", "m")))
    failed = client.objects[kubeclient.pods_path("ns", "m-1")]
    failed["status"] = {"phase": "Failed"}
    client._stamp(failed)
    ctl.pod_event("MODIFIED", copy.deepcopy(failed))
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    order = [p.rsplit("/", 1)[1] for verb, p in client.calls if verb in ("patch", "delete")
             and "/pods/" in p]
    assert order[0] == "m-1" and sorted(order[1:3]) == ["m-0", "m-2"] and order[3:] == ["m-1"]


def test_a_deleted_mesh_leaves_no_state_behind():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})

    async def scenario():
        ctl.start()
        await ctl.reconcile(("ns", "m"))
        ctl.enqueue(("ns", "m"), delay=60)
        del client.objects[MESH_PATH]
        ctl.mesh_event("DELETED", mesh_body("m"))
        state = (ctl._ensured, ctl._phases, ctl._last_status_rv, ctl._colocated_by, ctl._tokens._made,
                 ctl.queue.keys(), ctl.store.pods_by_rank(("ns", "m"), "uid-m"), ctl.store.primed(),
                 ctl._entries)
        await ctl.stop()
        return state

    assert all(not part for part in asyncio.run(scenario()))


def test_a_mesh_deleted_during_its_reconcile_leaves_no_state_behind():
    """The DELETED event comes while the reconcile awaits the API: what that reconcile makes
    afterwards (its phase, its status entries) is not kept for a mesh nothing reconciles again."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),), suspend=True)})
    for _ in range(2):
        asyncio.run(ctl.reconcile(("ns", "m")))
    planned = ctl._reconcile_pods

    async def deleted_meanwhile(mesh, previous):
        out = await planned(mesh, previous)
        ctl.mesh_event("DELETED", copy.deepcopy(client.objects.pop(MESH_PATH)))
        return out

    ctl._reconcile_pods = deleted_meanwhile
    assert asyncio.run(ctl.reconcile(("ns", "m"))) is None
    assert not ctl._entries and not ctl._phases and not ctl.store.primed()


def earlier_incarnations_pods(client, size):
    """Running, Ready pods of an earlier mesh "m" (uid "uid-old") that garbage collection has
    not removed yet."""
    old = mesh("m", per_host=(("procs", size),))
    for rank in range(size):
        body = pod(old, rank, uid=f"old-pod-{rank}", rv=50 + rank)
        body["metadata"]["ownerReferences"][0]["uid"] = "uid-old"
        client.objects[kubeclient.pods_path("ns", f"m-{rank}")] = body


@pytest.mark.parametrize("policy", ["RestartProc", "RestartMesh"])
def test_mesh_created_again_at_once_is_not_ready_on_the_earlier_meshs_pods(policy):
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                   restartPolicy=policy)})
    earlier_incarnations_pods(client, 2)
    asyncio.run(ctl.reconcile(("ns", "m")))
    status = client.objects[MESH_PATH]["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert ready["status"] == "False" and status["readyProcs"] == 0
    assert progressing["reason"] == "WaitingForPreviousPods"
    assert not any("address" in p for p in status["procs"])  # no client is sent to them
    assert [p for p in creates(client) if p.endswith("/pods")] == []  # names taken: wait
    assert not [p for verb, p in client.calls if verb == "delete"]  # not ours to delete
    # Garbage collection removes them (their DELETED events), then the mesh gets its own.
    for rank in range(2):
        gone = client.objects.pop(kubeclient.pods_path("ns", f"m-{rank}"))
        ctl.pod_event("DELETED", gone)
    asyncio.run(ctl.reconcile(("ns", "m")))
    own = ctl.store.pods_by_rank(("ns", "m"), "uid-m")
    assert sorted(own) == [0, 1]
    assert not ctl.store.foreign_by_rank(("ns", "m"), "uid-m")


def test_mesh_created_again_at_once_is_not_ready_while_its_role_conflicts():
    """The earlier mesh's Role is still there too: the reconcile stops at the Role (its Secret
    is no obstacle: the new mesh gets a generated name of its own), and the status it writes
    counts only the new mesh's pods (none)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    earlier_incarnations_pods(client, 1)
    client.objects[f"{ROLES}/m-procmesh-access"] = {
        "metadata": {"name": "m-procmesh-access", "namespace": "ns", "uid": "old-role",
                     "ownerReferences": [{"uid": "uid-old", "controller": True}]},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["m-token"],
                   "verbs": ["get"]}]}
    with pytest.raises(reconciling.ChildConflict):
        asyncio.run(ctl.reconcile(("ns", "m")))
    status = client.objects[MESH_PATH]["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and status["readyProcs"] == 0
    assert status["tokenSecretName"] != "m-token"  # not the earlier mesh's


def test_the_resync_relists_at_every_pass_only_when_kopf_feeds_the_pods():
    """Fed by kopf's watch the pod cache is relisted at every resync pass; fed by the
    operator's own (gapless) watch, at every CHILD_CHECK_RESYNCS-th pass only."""
    def relists(own_watch):
        ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
        asyncio.run(ctl.reconcile(("ns", "m")))
        if own_watch:
            ctl._pod_watches.append(object())  # never started: only its presence counts
        client.calls.clear()

        async def passes():
            for _ in range(2 * reconciling.CHILD_CHECK_RESYNCS):
                await ctl.resync_once()

        asyncio.run(passes())
        return sum(1 for verb, p in client.calls if verb == "list" and p.endswith("/pods"))

    assert relists(own_watch=False) == 2 * reconciling.CHILD_CHECK_RESYNCS
    assert relists(own_watch=True) == 2


@pytest.mark.parametrize("events_came", [True, False])
def test_a_reconcile_of_a_mesh_deleted_and_created_again_meanwhile_writes_nothing_onto_the_new_one(
        events_came):
    """The mesh is deleted and created again under its name while a reconcile of the earlier
    one awaits its pod creates: that reconcile's status (the earlier mesh's token Secret, its
    restarts, its procs) must not land on the new mesh, which would then name a Secret that
    garbage collection deletes and start with the earlier mesh's restarts used up. Whether or
    not the watch has told of the deletion and creation yet."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                   status={"restarts": 3})})
    planned = ctl._reconcile_pods

    async def recreated_meanwhile(mesh, previous):
        out = await planned(mesh, previous)
        gone = client.objects.pop(MESH_PATH)
        again = mesh_body("m", per_host=(("procs", 2),))
        again["metadata"]["uid"] = "uid-new"
        client.objects[MESH_PATH] = client._stamp(again)
        if events_came:
            ctl.mesh_event("DELETED", copy.deepcopy(gone))
            ctl.mesh_event("ADDED", copy.deepcopy(again))
        return out

    ctl._reconcile_pods = recreated_meanwhile
    # The write is refused (the mesh it read is gone): not a failure, a reconcile again soon.
    assert asyncio.run(ctl.reconcile(("ns", "m"))) == reconciling.CONFLICT_RETRY_SECONDS
    assert ctl.bodies.get(("ns", "m")) is None  # the next reconcile reads the newest body
    old_secrets = [p for p in client.objects if "/secrets/" in p]
    assert len(old_secrets) == 1
    old_secret_name = old_secrets[0].rsplit("/", 1)[1]
    status = client.objects[MESH_PATH].get("status") or {}
    assert status.get("tokenSecretName") != old_secret_name
    assert not status.get("restarts")


def test_a_late_deleted_event_of_the_earlier_mesh_does_not_bury_the_one_created_again():
    """The mesh is deleted and created again, and a reconcile reads the new one (a GET: its
    body had expired, as every CHILD_CHECK_RESYNCS resyncs) before the watch tells of the
    deletion. That DELETED event is the earlier incarnation's: the new mesh must stay known
    (its phase kept, so the resync keeps reconciling it, and its requeues are not dropped)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    ctl.bodies.expire(("ns", "m"))
    gone = client.objects.pop(MESH_PATH)
    for path in list(client.objects):  # garbage collection removes its children
        child = client.objects.pop(path)
        if "/pods/" in path:
            ctl.pod_event("DELETED", child)
    again = mesh_body("m", per_host=(("procs", 1),), lease={"durationSeconds": 60})
    again["metadata"]["uid"] = "uid-new"
    client.objects[MESH_PATH] = client._stamp(again)
    asyncio.run(ctl.reconcile(("ns", "m")))  # reads the new mesh with a GET
    ctl.mesh_event("DELETED", copy.deepcopy(gone))  # the watch catches up
    ctl.mesh_event("ADDED", copy.deepcopy(again))
    again_in = asyncio.run(ctl.reconcile(("ns", "m")))
    assert not ctl.bodies.gone("uid-new")
    assert ctl.known_meshes() == 1  # the resync enqueues it
    assert again_in is not None and again_in <= 60  # its lease is looked at again


class WatchedClient(FakeClient):
    """Serves the pod watch's list; its watch then waits (no event comes)."""

    async def watch(self, path, params):
        await asyncio.Event().wait()
        yield {}


def test_a_relist_of_the_pod_watch_drops_pods_deleted_while_it_was_down():
    """The pod watch lists again after 410 Gone or a failure; a pod deleted meanwhile brought
    no DELETED event. The list proves it gone: the cache must drop it then, not at the
    resync's next relist (every CHILD_CHECK_RESYNCS passes, about 5 min), during which the
    mesh reported the deleted proc as ready and did not recreate it."""
    client = WatchedClient({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    ctl = reconciling.Controller(client, NO_GANG)
    asyncio.run(ctl.reconcile(("ns", "m")))
    del client.objects[kubeclient.pods_path("ns", "m-1")]  # while the watch was down

    async def relisted():
        ctl.watch_pods([kubeclient.pods_path("ns")])
        await asyncio.sleep(0.05)
        for watch in ctl._pod_watches:
            await watch.stop()
        return sorted(ctl.store.pods_by_rank(("ns", "m"), "uid-m"))

    assert asyncio.run(relisted()) == [0]


def test_a_colocated_mesh_deleted_after_its_partner_leaves_no_state_behind():
    """The partner goes first (its entry still lists the colocated mesh, which waits for it);
    then the colocated mesh goes too: nothing is kept for either."""
    partner_path = kubeclient.mesh_path("ns", "p")
    ctl, client = controller({
        partner_path: mesh_body("p", per_host=(("procs", 1),)),
        MESH_PATH: mesh_body("m", per_host=(("procs", 1),), colocateWith="p"),
    })
    for key in (("ns", "p"), ("ns", "m")):
        asyncio.run(ctl.reconcile(key))
    assert ctl._colocated_by == {("ns", "p"): {("ns", "m")}}
    ctl.mesh_event("DELETED", client.objects.pop(partner_path))
    assert ctl._colocated_by == {("ns", "p"): {("ns", "m")}}  # m waits for its partner
    ctl.mesh_event("DELETED", client.objects.pop(MESH_PATH))
    assert ctl._colocated_by == {}


def test_a_restart_is_counted_when_the_mesh_changed_during_its_reconcile():
    """The status write of a reconcile that restarted a proc finds the mesh changed meanwhile
    (a lease renewal, say, not yet delivered by the watch): it is made again on the newest
    version, so the restart is counted (else maxRestarts could be exceeded) and its events
    go out."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                   restartPolicy="RestartProc", maxRestarts=1)})
    asyncio.run(ctl.reconcile(("ns", "m")))
    failed = client.objects[kubeclient.pods_path("ns", "m-0")]
    failed.setdefault("status", {})["phase"] = "Failed"
    client._stamp(failed)
    ctl.pod_event("MODIFIED", copy.deepcopy(failed))
    planned = ctl._reconcile_pods

    async def renewed_meanwhile(mesh_, previous):
        out = await planned(mesh_, previous)
        client.objects[MESH_PATH]["metadata"].setdefault("annotations", {})["renewed"] = "now"
        client._stamp(client.objects[MESH_PATH])
        return out

    ctl._reconcile_pods = renewed_meanwhile
    posted_before = len([c for c in client.calls if c[0] == "create" and c[1].endswith("/events")])
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["restarts"] == 1
    assert len([c for c in client.calls if c[0] == "create" and c[1].endswith("/events")]) > posted_before


def test_a_reconcile_whose_get_found_no_mesh_does_not_bury_the_one_created_meanwhile():
    """The GET of a reconcile answers 404 while the watch delivers the mesh created again under
    its name: the new incarnation stays known (not ignored as deleted until a restart)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    ctl.bodies.expire(("ns", "m"))
    gone = client.objects.pop(MESH_PATH)
    get = client.get_or_none

    async def created_again_meanwhile(path):
        found = await get(path)
        if path == MESH_PATH:
            ctl.mesh_event("DELETED", copy.deepcopy(gone))
            again = mesh_body("m", per_host=(("procs", 1),))
            again["metadata"]["uid"] = "uid-new"
            client.objects[MESH_PATH] = client._stamp(again)
            ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
        return found

    client.get_or_none = created_again_meanwhile
    assert asyncio.run(ctl.reconcile(("ns", "m"))) is None
    assert not ctl.bodies.gone("uid-new")
    assert ctl.bodies.get(("ns", "m"))["metadata"]["uid"] == "uid-new"


def test_an_older_relist_does_not_bring_back_a_pod_a_newer_list_proved_gone():
    """The pod watch's list (after 410 Gone) drops a pod deleted while no watch ran; a resync
    relist taken before that deletion, landing after, must not bring it back (no event would
    remove it again)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    older = asyncio.run(client.list(kubeclient.pods_path("ns")))
    del client.objects[kubeclient.pods_path("ns", "m-1")]
    client.rv += 1
    newer = asyncio.run(client.list(kubeclient.pods_path("ns")))
    ctl.pods_listed("ns", newer["items"], newer["metadata"]["resourceVersion"])
    ctl.store.repair("ns", older["items"], int(older["metadata"]["resourceVersion"]))
    assert sorted(ctl.store.pods_by_rank(("ns", "m"), "uid-m")) == [0]


def test_an_eviction_of_a_mesh_created_again_meanwhile_writes_nothing_onto_the_new_one(monkeypatch):
    """The eviction's status write (before any proc is stopped) of a queued mesh deleted and
    created again while the reconcile read its Workload: the earlier mesh's status (its token
    Secret's name, its restarts) must not land on the new mesh."""
    from procmesh_operator import workloads

    def queued():
        body = mesh_body("m", per_host=(("procs", 2),))
        body["metadata"]["labels"] = {workloads.QUEUE_NAME_LABEL: "q"}
        return body

    ctl, client = controller({MESH_PATH: queued()})
    state = {"verdict": workloads.Admission(workloads.STATE_ADMITTED, "Admitted", "ok", True),
             "recreate": False}

    async def admission(client_, mesh_, queue, pods, settings):
        if state["recreate"]:
            client.objects.pop(MESH_PATH)
            again = queued()
            again["metadata"]["uid"] = "uid-new"
            client.objects[MESH_PATH] = client._stamp(again)
            state["recreate"] = False
        return state["verdict"]

    monkeypatch.setattr(reconciling.admitting, "admission", admission)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"].get("tokenSecretName")
    state.update(recreate=True,
                 verdict=workloads.Admission(workloads.STATE_EVICTED, "Preempted", "by high", True))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert not (client.objects[MESH_PATH].get("status") or {}).get("tokenSecretName")


def test_a_write_whose_response_was_lost_is_not_undone_by_the_next_reconcile():
    """A status write applied by the API server whose response was lost (a client timeout),
    then a reconcile from the cached, older body: its write is refused, and it must not be
    made again over the status that changed (restarts back from 1 to 0 would let maxRestarts
    be exceeded); the mesh is read afresh instead."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                   restartPolicy="RestartProc", maxRestarts=1)})

    def set_pod(rank, phase, ready):
        body = client.objects[kubeclient.pods_path("ns", f"m-{rank}")]
        body.setdefault("spec", {})["nodeName"] = "n1"
        body["status"] = {"phase": phase, "podIP": "10.0.0.1",
                          "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        client._stamp(body)
        ctl.pod_event("MODIFIED", copy.deepcopy(body))

    asyncio.run(ctl.reconcile(("ns", "m")))
    set_pod(0, "Running", True)
    set_pod(1, "Running", True)
    asyncio.run(ctl.reconcile(("ns", "m")))
    set_pod(0, "Failed", False)
    applied = client.merge_patch
    lost = []

    async def response_lost(path, body):
        out = await applied(path, body)
        if not lost and path.endswith("/status"):
            lost.append(path)
            raise asyncio.TimeoutError("the write was applied; its response was lost")
        return out

    client.merge_patch = response_lost
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["restarts"] == 1
    set_pod(1, "Failed", False)  # a second failure: maxRestarts (1) is used up
    deleted = len([c for c in client.calls if c[0] == "delete"])
    for _ in range(3):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["restarts"] == 1
    assert client.objects[MESH_PATH]["status"]["phase"] == "Failed"
    # Only rank 0, whose restart the lost write counted (its pod marked with that count), is
    # restarted; rank 1 is not.
    deletes = [p for verb, p in client.calls if verb == "delete"][deleted:]
    assert deletes == [kubeclient.pods_path("ns", "m-0")], deletes


def test_a_deleted_node_is_forgotten_at_a_resync_once_no_proc_pod_is_bound_to_it():
    """Deleted nodes stay known while a pod of ours is bound to one (planning replaces those
    pods); after that a resync pass drops them, so an autoscaled cluster's departed nodes do not
    pile up in every outage check and plan."""
    ctl, _ = controller({})
    m = mesh("m", per_host=(("procs", 1),))
    ctl.store.upsert(pod(m, 0, node="kept"))
    for name in ("kept", "empty"):
        ctl.node_event("DELETED", {"metadata": {"name": name}})
    ctl.node_event("MODIFIED", {"metadata": {"name": "down"},
                                "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    assert set(ctl._losses) == {"kept", "empty", "down"}
    asyncio.run(ctl.resync_once())
    assert set(ctl._losses) == {"kept", "down"}  # a lost node still there stays, pods or not
    ctl.store.forget("ns", "m", "m-0", "pod-uid-m-0")
    asyncio.run(ctl.resync_once())
    assert set(ctl._losses) == {"down"}


def test_a_deleted_node_is_kept_while_a_mesh_the_queue_knows_is_not_listed_yet():
    """After an operator restart, meshes wait in the queue before their pods are listed: one
    of them may have a pod on the deleted node, so its entry stays until they are."""
    ctl, _ = controller({})
    ctl.node_event("DELETED", {"metadata": {"name": "gone"}})

    async def resync_with_a_waiting_mesh() -> None:
        async def never(key):
            return None

        ctl.queue = queueing.WorkQueue(never)
        ctl.queue.enqueue(("ns", "waiting"), delay=3600)  # known, not reconciled, not listed
        await ctl.resync_once()
        await ctl.queue.close(0)

    asyncio.run(resync_with_a_waiting_mesh())
    assert set(ctl._losses) == {"gone"}


def run_pods(ctl, client, names):
    """The kubelet ran these pods: Running and Ready, as their watch events say."""
    for name in names:
        body = client.objects[kubeclient.pods_path("ns", name)]
        body["status"] = {"phase": "Running", "podIP": "10.0.0.1",
                          "conditions": [{"type": "Ready", "status": "True"}]}
        client._stamp(body)
        ctl.pod_event("MODIFIED", copy.deepcopy(body))


class DiesAfterDeleteClient(FakeClient):
    """The operator dies right after deleting pods: no status write goes out after a delete.
    Each delete records the status as it stood then."""

    def __init__(self, objects):
        super().__init__(objects)
        self.status_at_delete = []

    async def delete(self, path, *, uid=None, grace_period_seconds=None):
        self.status_at_delete.append(copy.deepcopy(self.objects[MESH_PATH].get("status")))
        return await super().delete(path, uid=uid, grace_period_seconds=grace_period_seconds)

    async def merge_patch(self, path, body):
        if self.status_at_delete and path.endswith("/status"):
            raise kubeclient.Unanswered("the operator died")
        return await super().merge_patch(path, body)


def test_a_restart_is_recorded_before_its_pods_are_deleted():
    """An operator that dies between deleting a failed proc's pod and writing the status lost
    the restart (maxRestarts could be exceeded); recorded first, with the pod as Terminating, it
    is counted once: the next operator neither loses it nor counts the delete again."""
    client = DiesAfterDeleteClient({MESH_PATH: mesh_body("m", per_host=(("procs", 2),),
                                                         restartPolicy="RestartProc",
                                                         maxRestarts=3)})
    ctl = reconciling.Controller(client, NO_GANG)
    asyncio.run(ctl.reconcile(("ns", "m")))
    run_pods(ctl, client, ["m-0", "m-1"])
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["readyProcs"] == 2
    failed = client.objects[kubeclient.pods_path("ns", "m-1")]
    failed["status"]["phase"] = "Failed"
    client._stamp(failed)
    ctl.pod_event("MODIFIED", copy.deepcopy(failed))
    with pytest.raises(kubeclient.Unanswered):
        asyncio.run(ctl.reconcile(("ns", "m")))
    [at_delete] = client.status_at_delete
    assert at_delete["restarts"] == 1 and at_delete["procs"][1]["podPhase"] == "Terminating"
    restarted = FakeClient({})
    restarted.objects, restarted.rv = client.objects, client.rv  # the same cluster
    fresh = reconciling.Controller(restarted, NO_GANG)
    asyncio.run(fresh.reconcile(("ns", "m")))
    status = restarted.objects[MESH_PATH]["status"]
    assert status["restarts"] == 1 and kubeclient.pods_path("ns", "m-1") in restarted.objects


def test_a_pod_deleted_under_a_running_mesh_counts_against_max_restarts():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 3),),
                                                   restartPolicy="RestartMesh", maxRestarts=0)})
    asyncio.run(ctl.reconcile(("ns", "m")))
    run_pods(ctl, client, ["m-0", "m-1", "m-2"])
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert client.objects[MESH_PATH]["status"]["phase"] == "Ready"
    gone = client.objects.pop(kubeclient.pods_path("ns", "m-1"))
    ctl.pod_event("DELETED", gone)
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert not creates(client)
    status = client.objects[MESH_PATH]["status"]
    degraded = [c for c in status["conditions"] if c["type"] == "Degraded"][0]
    assert degraded["reason"] == "RestartLimitReached" and status["restarts"] == 0
    assert "proc 1 (its pod m-1 was deleted)" in degraded["message"]
    assert status["procs"][1]["podPhase"] == "Deleted"
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "m")))  # and it stays so
    assert not creates(client)


def test_someone_elses_pod_under_a_ranks_name_is_a_conflict():
    """``kubectl run m-0`` before the mesh: its create's 409 is no earlier run of ours, so it is
    reported (Degraded, naming the pod and the fix) instead of waited on for ever."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    client.objects[kubeclient.pods_path("ns", "m-0")] = {
        "metadata": {"name": "m-0", "namespace": "ns", "uid": "theirs", "resourceVersion": "5",
                     "labels": {"run": "m-0"}}, "spec": {}, "status": {"phase": "Running"}}
    with pytest.raises(create_refusals.CreatesFailed) as failed:
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert isinstance(failed.value.error, reconciling.ChildConflict)
    degraded = [c for c in client.objects[MESH_PATH]["status"]["conditions"]
                if c["type"] == "Degraded"][0]
    assert degraded["status"] == "True" and degraded["message"].startswith(
        "pod m-0 exists and is not owned by this ProcMesh")
    assert "delete it or rename the mesh" in degraded["message"]
    assert kubeclient.pods_path("ns", "m-1") in client.objects  # the other ranks are created
    assert ("CreatedProcs", "created 1 pod(s): m-1") in mesh_events(client)  # and said


def refusing_pods(client, allowed, message, status=403):
    """The client admits ``allowed`` proc pods, then refuses the rest with ``message``; each
    pod create yields to the event loop first, as a request in flight does."""
    real = client.create
    refused = []

    async def create(path, body, *, dry_run=False):
        if path.endswith("/pods"):
            await asyncio.sleep(0.001)
            if len([p for p in client.objects if "/pods/" in p]) >= allowed:
                refused.append(body["metadata"]["name"])
                raise kubeclient.ApiError(status, "Forbidden", message)
        return await real(path, body, dry_run=dry_run)

    client.create = create
    return refused


def mesh_events(client):
    return [(o["reason"], o["message"]) for p, o in client.objects.items() if "/events/" in p]


QUOTA = ('pods "m-1" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=8, '
         'limited: pods=8')  # other pods hold the room an 8-proc mesh fits in


def test_a_full_quota_is_a_wait_and_stops_the_other_creates():
    """A quota full of other pods: the mesh waits for room (Waiting, the API's words and what
    to do), the first refusal stops the creates still to go (one refused request, not one per
    worker), and the pod made before it is still named in CreatedProcs."""
    ctl, client = controller({MESH_PATH: mesh_body("m", hosts=8, per_host=(("procs", 1),))})
    refused = refusing_pods(client, 1, QUOTA)
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert "m-1" in refused and len(refused) <= 7  # the creates in flight, then no more
    status = client.objects[MESH_PATH]["status"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Waiting"
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "WaitingForQuota")
    assert (conds["Progressing"]["status"], conds["Progressing"]["reason"]) == ("True", "WaitingForQuota")
    assert (conds["Scheduled"]["status"], conds["Scheduled"]["reason"]) == ("False", "WaitingForQuota")
    assert conds["Degraded"]["status"] == "False"
    assert "exceeded quota: pods" in conds["Ready"]["message"]
    assert "once the namespace's ResourceQuota has room" in conds["Ready"]["message"]
    assert ("CreatedProcs", "created 1 pod(s): m-0") in mesh_events(client)


def test_a_quota_change_in_its_namespace_looks_again_at_a_mesh_waiting_for_quota():
    """quotawatch.py: room comes as a quota changes (raised, or its usage counted down)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", hosts=8, per_host=(("procs", 1),))})
    real = client.create
    refusing_pods(client, 1, QUOTA)
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    woken = []
    ctl.enqueue = lambda key, delay=0.0: woken.append(key)
    ctl.quota_event("MODIFIED", {"metadata": {"name": "pods", "namespace": "other"}})
    assert woken == []  # another namespace's quota
    ctl.quota_event("MODIFIED", {"metadata": {"name": "pods", "namespace": "ns"}})
    assert woken == [("ns", "m")]
    client.create = real  # the room came: the mesh no longer waits, and no quota wakes it
    asyncio.run(ctl.reconcile(("ns", "m")))
    ctl.quota_event("MODIFIED", {"metadata": {"name": "pods", "namespace": "ns"}})
    assert woken == [("ns", "m")]


def test_a_quota_too_small_for_the_mesh_is_looked_at_again_when_a_quota_changes():
    """A refusal whose fix is to raise the quota (PodRefused): the raise is acted on at once."""
    ctl, client = controller({MESH_PATH: mesh_body("m", hosts=8, per_host=(("procs", 1),))})
    refusing_pods(client, 0, 'pods "m-0" is forbidden: exceeded quota: pods, requested: pods=1, '
                             'used: pods=0, limited: pods=4')
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert {c["type"]: c["reason"] for c in client.objects[MESH_PATH]["status"]["conditions"]}["Ready"] == "PodRefused"
    woken = []
    ctl.enqueue = lambda key, delay=0.0: woken.append(key)
    ctl.quota_event("MODIFIED", {"metadata": {"name": "pods", "namespace": "ns"}})
    assert woken == [("ns", "m")]


PSA = 'pods "m-0" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'


def test_a_namespace_refusing_every_pod_costs_one_request_per_retry():
    """Slow start: the first pod alone; its refusal stops the 39 others before they are sent."""
    ctl, client = controller({MESH_PATH: mesh_body("m", hosts=40, per_host=(("procs", 1),))})
    refused = refusing_pods(client, 0, PSA)
    for _ in range(2):
        with pytest.raises(create_refusals.CreatesFailed):
            asyncio.run(ctl.reconcile(("ns", "m")))
    assert refused == ["m-0", "m-0"]


def test_a_refusal_clears_once_the_pods_are_admitted():
    ctl, client = controller({MESH_PATH: mesh_body("m")})
    real = client.create
    refusing_pods(client, 0, QUOTA)
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    client.create = real  # the quota is raised
    asyncio.run(ctl.reconcile(("ns", "m")))
    status = client.objects[MESH_PATH]["status"]
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert "WaitingForQuota" not in reasons.values() and status["phase"] != "Waiting", status
    assert sorted(p.rsplit("/", 1)[1] for p in client.objects if "/pods/" in p) == ["m-0", "m-1"]


def test_pod_security_refusing_every_pod_is_a_failure_that_says_what_to_set():
    ctl, client = controller({MESH_PATH: mesh_body("m")})
    refusing_pods(client, 0, PSA)
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    status = client.objects[MESH_PATH]["status"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Failed"  # no wait fixes it; the operator still retries
    for type_ in ("Ready", "Degraded", "Progressing", "Scheduled"):
        assert conds[type_]["reason"] == "PodRefused", type_
    assert "spec.template.securityContext" in conds["Degraded"]["message"]
    assert "violates PodSecurity" in conds["Degraded"]["message"]


def test_a_server_error_on_a_pod_create_stays_a_reconcile_error():
    ctl, client = controller({MESH_PATH: mesh_body("m")})
    refusing_pods(client, 0, "etcdserver: request timed out", status=500)
    with pytest.raises(create_refusals.CreatesFailed):
        asyncio.run(ctl.reconcile(("ns", "m")))
    degraded = next(c for c in client.objects[MESH_PATH]["status"]["conditions"]
                    if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ReconcileError")


def test_a_relist_of_the_mesh_watch_reads_again_a_mesh_deleted_while_it_was_down():
    """The mesh watch lists again after a failure (its CRD gone and back, 410 Gone); a mesh
    deleted meanwhile brought no DELETED event. Absent from the list, it is read fresh at its
    next reconcile (which finds it gone and forgets it), and a listed mesh is left as it is."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    ctl.meshes_listed("ns", [mesh_body("m", per_host=(("procs", 1),))], "7")
    assert not ctl.bodies.take_fresh_next(("ns", "m"))
    del client.objects[MESH_PATH]
    ctl.meshes_listed("other", [], "8")  # another namespace's list says nothing of it
    assert not ctl.bodies.take_fresh_next(("ns", "m"))
    ctl.meshes_listed(None, [], "9")
    assert ctl.bodies.take_fresh_next(("ns", "m"))
    ctl.bodies.read_fresh_next(("ns", "m"))
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert ctl.known_meshes() == 0
