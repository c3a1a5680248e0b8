"""Reconciles read the mesh from its watch (procmesh_operator.watched), not with a GET each.

Aspects: the newest body wins by resourceVersion (a late event cannot undo a status write's
response), a new incarnation always wins; a reconcile triggered by events makes no GET of the
mesh, and still acts on a spec change and on a deletion it learns from events only; the resync
reads each mesh once more; the Role and Service are created without a read at a new mesh's
first reconcile and read every CHILD_CHECK_RESYNCS resync passes (counted per mesh), never per
reconcile.
"""

import asyncio
import copy

from mesh_client._src import contract
from procmesh_operator import kubeclient, reconciling, watched

from .builders import mesh_body
from .test_reconciling import MESH_PATH, controller, edit_mesh

KEY = ("ns", "m")
ROLE_PATH = kubeclient.roles_path("ns", contract.access_role_name("m"))
SERVICE_PATH = kubeclient.core_path("ns", "services", contract.service_name("m"))


def body(rv, uid="u1", **spec):
    return {"metadata": {"name": "m", "namespace": "ns", "uid": uid, "resourceVersion": str(rv)},
            "spec": spec}


def test_the_newest_version_wins():
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(5, hosts=2))
    bodies.remember(KEY, body(4, hosts=1))  # a late event, older than what was written
    assert bodies.get(KEY)["spec"] == {"hosts": 2}
    bodies.remember(KEY, body(6, hosts=3))
    assert bodies.get(KEY)["spec"] == {"hosts": 3}


def test_an_incarnation_is_deleting_once_seen_deleted_or_marked_for_deletion():
    """Asked before each pod create: a mesh deleted (or with a deletionTimestamp) gets none
    more; a new incarnation under the name is not the one deleted."""
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(5))
    assert not bodies.deleting(KEY, "u1")
    marked = body(6)
    marked["metadata"]["deletionTimestamp"] = "2026-12-07T08:00:00Z"
    bodies.remember(KEY, marked)
    assert bodies.deleting(KEY, "u1") and not bodies.deleting(KEY, "u2")
    bodies.forget(KEY, "u1")
    bodies.remember(KEY, body(7, uid="u2"))
    assert bodies.deleting(KEY, "u1") and not bodies.deleting(KEY, "u2")


def test_a_new_incarnation_wins_with_its_newer_version_and_a_late_old_one_loses():
    """resourceVersions grow cluster-wide: a mesh created again has a newer one than any body
    of the earlier mesh, whose late events must not replace it."""
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(9))
    bodies.remember(KEY, body(12, uid="u2"))
    assert bodies.get(KEY)["metadata"]["uid"] == "u2"
    bodies.remember(KEY, body(10))  # a late MODIFIED of the earlier mesh
    assert bodies.get(KEY)["metadata"]["uid"] == "u2"


def test_a_forget_without_uid_keeps_a_body_that_came_meanwhile():
    """A GET found no mesh (forget with no uid): a body held now came after it, of a mesh
    created again under the name; it is neither dropped nor buried."""
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(12, uid="u2"))
    bodies.forget(KEY)
    assert bodies.get(KEY)["metadata"]["uid"] == "u2" and not bodies.gone("u2")


def test_get_returns_a_copy():
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(1, hosts=1))
    bodies.get(KEY)["spec"]["hosts"] = 7
    assert bodies.get(KEY)["spec"] == {"hosts": 1}
    bodies.forget(KEY, "u1")
    assert bodies.get(KEY) is None


def mesh_gets(client):
    return [p for verb, p in client.calls if verb == "get" and p == MESH_PATH]


def test_event_driven_reconciles_make_no_get_of_the_mesh():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    for _ in range(3):
        asyncio.run(ctl.reconcile(KEY))
    assert mesh_gets(client) == []
    assert client.objects[MESH_PATH]["status"]["desiredProcs"] == 2


def test_a_spec_change_from_an_event_is_acted_on():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    asyncio.run(ctl.reconcile(KEY))
    assert len(ctl.store.pods_by_rank(KEY, "uid-m")) == 2
    edit_mesh(ctl, client, MESH_PATH, lambda m: m["spec"].update(suspend=True))
    asyncio.run(ctl.reconcile(KEY))
    assert ctl.store.pods_by_rank(KEY, "uid-m") == {}
    assert mesh_gets(client) == []


def test_the_status_write_is_the_newest_body():
    """The reconcile after a status write starts from that status, though its echo has not
    arrived: no second write of the same status."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    asyncio.run(ctl.reconcile(KEY))
    client.calls.clear()
    asyncio.run(ctl.reconcile(KEY))
    assert ("patch", MESH_PATH + "/status") not in client.calls


def test_a_deletion_seen_only_as_an_event_stops_the_mesh():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    asyncio.run(ctl.reconcile(KEY))
    edit_mesh(ctl, client, MESH_PATH,
              lambda m: m["metadata"].update(deletionTimestamp="2026-12-01T00:00:00Z"))
    client.calls.clear()
    assert asyncio.run(ctl.reconcile(KEY)) is None
    assert not [c for c in client.calls if c[0] in ("create", "patch")]
    assert ctl.known_meshes() == 0
    ctl.mesh_event("DELETED", copy.deepcopy(client.objects.pop(MESH_PATH)))
    assert ctl.bodies.get(KEY) is None
    assert asyncio.run(ctl.reconcile(KEY)) is None  # no body: the GET finds it gone
    assert mesh_gets(client) == [MESH_PATH]


def child_requests(client):
    """Requests about the Role and the Service: (verb, kind) in order."""
    out = []
    for verb, path in client.calls:
        for kind, child in (("Role", ROLE_PATH), ("Service", SERVICE_PATH)):
            if path in (child, child.rsplit("/", 1)[0]):
                out.append((verb, kind))
    return out


def test_children_are_checked_at_the_first_reconcile_and_at_resync_only():
    """A new mesh's children are created without a read first (the Role is read once before,
    by the token Secret step: an older operator's mesh has one naming its Secret, token_secrets.py);
    later reconciles and resync
    passes leave them alone until CHILD_CHECK_RESYNCS passes later, when the resync reads them
    (they exist), creates nothing, and reads the mesh fresh once."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    for _ in range(3):
        asyncio.run(ctl.reconcile(KEY))
    assert child_requests(client) == [("get", "Role"), ("create", "Role"), ("create", "Service")]

    async def resync_then_reconcile():
        ctl.start()
        try:
            await ctl.resync_once()
            await ctl.reconcile(KEY)
            await ctl.reconcile(KEY)
        finally:
            await ctl.stop()

    # The passes after it only relist, until the mesh's children were last checked (at its
    # first reconcile) CHILD_CHECK_RESYNCS passes ago.
    for _ in range(reconciling.CHILD_CHECK_RESYNCS):
        client.calls.clear()
        asyncio.run(resync_then_reconcile())
        assert child_requests(client) == [] and mesh_gets(client) == []
    client.calls.clear()
    asyncio.run(resync_then_reconcile())
    assert child_requests(client) == [("get", "Role"), ("get", "Service")]
    assert mesh_gets(client) == [MESH_PATH]  # the resync reads the mesh fresh once
    for _ in range(reconciling.CHILD_CHECK_RESYNCS - 1):
        client.calls.clear()
        asyncio.run(resync_then_reconcile())
        assert child_requests(client) == [] and mesh_gets(client) == []
    client.calls.clear()
    asyncio.run(resync_then_reconcile())
    assert child_requests(client) == [("get", "Role"), ("get", "Service")]


def test_a_deleted_incarnation_is_not_brought_back():
    """A status write's response handled after the DELETED event (the write landed just
    before the deletion) must not revive the deleted mesh's body; a new incarnation may."""
    bodies = watched.MeshBodies()
    bodies.remember(KEY, body(5))
    bodies.forget(KEY, "u1")
    bodies.remember(KEY, body(6))  # the late response
    assert bodies.get(KEY) is None
    bodies.remember(KEY, body(7, uid="u2"))
    assert bodies.get(KEY)["metadata"]["uid"] == "u2"


def test_a_write_response_after_the_deletion_creates_nothing():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    asyncio.run(ctl.reconcile(KEY))
    stale = copy.deepcopy(client.objects[MESH_PATH])
    gone = client.objects.pop(MESH_PATH)
    ctl.mesh_event("DELETED", copy.deepcopy(gone))
    ctl._wrote(KEY, stale)  # as if a status write's response came in after the event
    for path in [p for p in client.objects if "/pods/" in p]:  # garbage collection
        ctl.pod_event("DELETED", client.objects.pop(path))
    client.calls.clear()
    assert asyncio.run(ctl.reconcile(KEY)) is None
    assert creates_of(client) == []


def creates_of(client):
    return [p for verb, p in client.calls if verb == "create"]


def test_a_deletion_during_a_reconcile_leaves_the_mesh_forgotten():
    """The DELETED event is handled while a reconcile awaits its status write: that reconcile
    must not record the mesh's phase again afterwards (the phase gauges would count a mesh
    nothing reconciles any more)."""
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl.mesh_event("ADDED", copy.deepcopy(client.objects[MESH_PATH]))
    write = client.merge_patch

    async def write_then_delete(path, body):
        written = await write(path, body)
        if path == MESH_PATH + "/status":
            ctl.mesh_event("DELETED", copy.deepcopy(client.objects.pop(MESH_PATH)))
        return written

    client.merge_patch = write_then_delete
    assert asyncio.run(ctl.reconcile(KEY)) is None
    assert ctl.known_meshes() == 0

