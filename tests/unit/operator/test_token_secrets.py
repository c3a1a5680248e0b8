"""The token Secret step of the reconcile (procmesh_operator.token_secrets) against the fake of
our own API wrapper (test_reconciling.FakeClient); the real control plane's version of the crash
windows is tests/integration/operator/test_token_secrets.py.

Aspects: the Secret gets a generated name, recorded in status before the Role and pods, which
name it; a Secret is never read; an operator stopped after the create (an orphan) or after the
status write starts over safely in a fresh process; Secrets planted at the legacy name and at
the very name the generator picks next are never taken; a recorded name is created again while
the mesh has no pods (rotation) and left alone while it has; a mesh of an older operator (its
Role names ``<mesh>-token``) keeps that Secret; a failed status write is retried with the same
Secret; a status or Role naming a Secret the operator never generates is refused; a name another
replica recorded first wins.
"""

import asyncio
import copy

import pytest

from procmesh_operator import kubeclient, token_secrets

from .builders import mesh_body
from .test_reconciling import MESH_PATH, ROLES, FakeClient, controller, creates, secret_reads

SECRETS = kubeclient.core_path("ns", "secrets")
ROLE_PATH = f"{ROLES}/m-procmesh-access"


class Crash(BaseException):
    """The operator process ends here (what os._exit does for real in the integration test)."""


class CrashingClient(FakeClient):
    """Ends the 'process' right after the given request succeeded."""

    crash_after: tuple[str, str] | None = None

    async def create(self, path, body):
        created = await super().create(path, body)
        if self.crash_after == ("create", path):
            raise Crash
        return created

    async def merge_patch(self, path, body):
        written = await super().merge_patch(path, body)
        if self.crash_after == ("patch", path) and "conditions" not in body["status"]:
            raise Crash
        return written


def recorded(client):
    return client.objects[MESH_PATH]["status"]["tokenSecretName"]


def mounted(client, rank=0):
    pod = client.objects[kubeclient.pods_path("ns", f"m-{rank}")]
    return pod["spec"]["volumes"][0]["secret"]["secretName"]


def granted(client):
    return token_secrets.secrets_granted(client.objects[ROLE_PATH])


def secrets(client):
    return sorted(p.rsplit("/", 1)[1] for p in client.objects if p.startswith(SECRETS + "/"))


def test_generated_name_is_recorded_before_the_role_and_named_by_role_and_pods():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 2),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    name = recorded(client)
    assert name.startswith("m-token-") and secrets(client) == [name]
    assert granted(client) == [name] and mounted(client, 0) == mounted(client, 1) == name
    order = [(verb, p) for verb, p in client.calls if verb in ("create", "patch")]
    record = order.index(("patch", MESH_PATH + "/status"))
    assert order.index(("create", SECRETS)) < record < order.index(("create", ROLES))
    assert secret_reads(client) == []


@pytest.mark.parametrize("crash_after", [("create", SECRETS), ("patch", MESH_PATH + "/status")])
def test_an_operator_stopped_between_secret_and_role_leaves_no_stuck_mesh(crash_after):
    client = CrashingClient({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    client.crash_after = crash_after
    ctl, _ = controller({})
    ctl.client = client
    with pytest.raises(Crash):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert ROLE_PATH not in client.objects and not creates(client)[1:]  # the Secret only
    [first] = secrets(client)
    client.crash_after = None
    fresh, _ = controller({})  # the next replica: knows nothing of the first
    fresh.client = client
    asyncio.run(fresh.reconcile(("ns", "m")))
    name = recorded(client)
    assert granted(client) == [name] and mounted(client) == name
    if crash_after[0] == "create":  # not recorded: an orphan (collected with the mesh)
        assert name != first and secrets(client) == sorted([first, name])
        orphan = client.objects[f"{SECRETS}/{first}"]
        assert orphan["metadata"]["ownerReferences"][0]["uid"] == "uid-m"
    else:  # recorded: this operator's, created again (AlreadyExists) and kept
        assert name == first and secrets(client) == [first]
    assert secret_reads(client) == []


def test_planted_secrets_are_never_taken():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    guess = f"m-token-{client.rv + 1:05d}"  # the very name the fake generator picks next
    for name in ("m-token", guess):
        client.objects[f"{SECRETS}/{name}"] = {"metadata": {"name": name}, "data": {"t": "0"}}
    asyncio.run(ctl.reconcile(("ns", "m")))
    name = recorded(client)
    assert name not in ("m-token", guess) and name.startswith("m-token-")
    assert granted(client) == [name] and mounted(client) == name
    for planted in ("m-token", guess):
        assert client.objects[f"{SECRETS}/{planted}"]["data"] == {"t": "0"}  # not replaced
    assert secret_reads(client) == []


def test_recorded_secret_is_created_again_only_without_pods():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    asyncio.run(ctl.reconcile(("ns", "m")))
    name = recorded(client)
    path = f"{SECRETS}/{name}"
    before = client.objects.pop(path)["data"]["token"]
    asyncio.run(ctl.reconcile(("ns", "m")))  # running procs: their token must not change
    assert path not in client.objects
    for pod in [p for p in client.objects if "/pods/" in p]:
        ctl.pod_event("DELETED", client.objects.pop(pod))  # suspended, say: no pods
    fresh, _ = controller({})
    fresh.client = client
    asyncio.run(fresh.reconcile(("ns", "m")))
    assert recorded(client) == name and client.objects[path]["data"]["token"] != before
    assert mounted(client) == name


def legacy_mesh(client, *, with_secret=True):
    """What an operator before status.tokenSecretName left: <mesh>-token, then the Role
    naming it, and a status without the field."""
    if with_secret:
        client.objects[f"{SECRETS}/m-token"] = {
            "metadata": {"name": "m-token", "ownerReferences": [{"uid": "uid-m"}]},
            "data": {"token": "b2xk"}}
    client.objects[ROLE_PATH] = {
        "metadata": {"name": "m-procmesh-access", "ownerReferences": [{"uid": "uid-m"}]},
        "rules": [{"apiGroups": ["procmesh.io"], "resources": ["procmeshes"],
                   "resourceNames": ["m"], "verbs": ["get", "watch"]},
                  {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["m-token"],
                   "verbs": ["get"]}]}


@pytest.mark.parametrize("with_secret", [True, False])
def test_an_older_operators_mesh_keeps_its_secret_name(with_secret):
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),),
                                                   status={"observedGeneration": 1})})
    legacy_mesh(client, with_secret=with_secret)
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert recorded(client) == "m-token" and secrets(client) == ["m-token"]
    assert mounted(client) == "m-token" and granted(client) == ["m-token"]
    token = client.objects[f"{SECRETS}/m-token"]["data"]["token"]
    assert (token == "b2xk") == with_secret  # deleted while it had no pods: a new token


def test_a_status_naming_another_secret_is_refused():
    ctl, client = controller({MESH_PATH: mesh_body(
        "m", per_host=(("procs", 1),), status={"tokenSecretName": "db-password"})})
    with pytest.raises(token_secrets.SecretConflict):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert creates(client) == [] and secret_reads(client) == []
    degraded = next(c for c in client.objects[MESH_PATH]["status"]["conditions"]
                    if c["type"] == "Degraded")
    assert degraded["status"] == "True" and "db-password" in degraded["message"]


def test_own_role_naming_another_secret_is_refused():
    ctl, client = controller({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    legacy_mesh(client)
    client.objects[ROLE_PATH]["rules"][1]["resourceNames"] = ["db-password"]
    with pytest.raises(token_secrets.SecretConflict):
        asyncio.run(ctl.reconcile(("ns", "m")))
    assert not [p for p in creates(client) if p.endswith("/pods")]


class RacedClient(FakeClient):
    """Another replica records its own name just before this one's status write."""

    raced = False

    async def merge_patch(self, path, body):
        if not self.raced and "tokenSecretName" in body.get("status", {}):
            self.raced = True
            other = copy.deepcopy(self.objects[MESH_PATH])
            other.setdefault("status", {})["tokenSecretName"] = "m-token-wzzzz"
            self.objects[MESH_PATH] = self._stamp(other)
            self.objects[f"{SECRETS}/m-token-wzzzz"] = {"metadata": {"name": "m-token-wzzzz"}}
        return await super().merge_patch(path, body)


def test_a_name_recorded_first_by_another_replica_wins():
    client = RacedClient({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl, _ = controller({})
    ctl.client = client
    asyncio.run(ctl.reconcile(("ns", "m")))
    assert recorded(client) == "m-token-wzzzz"
    assert granted(client) == ["m-token-wzzzz"] and mounted(client) == "m-token-wzzzz"


class FailingRecordClient(FakeClient):
    """The first write of the recorded name fails (a 500), as the API server may."""

    failed = False

    async def merge_patch(self, path, body):
        if not self.failed and "tokenSecretName" in body.get("status", {}):
            self.failed = True
            raise kubeclient.ApiError(500, "InternalError", "etcd timeout")
        return await super().merge_patch(path, body)


def test_a_failed_status_write_is_retried_with_the_same_secret():
    client = FailingRecordClient({MESH_PATH: mesh_body("m", per_host=(("procs", 1),))})
    ctl, _ = controller({})
    ctl.client = client
    with pytest.raises(kubeclient.ApiError):
        asyncio.run(ctl.reconcile(("ns", "m")))
    [first] = secrets(client)
    asyncio.run(ctl.reconcile(("ns", "m")))  # the same process: no second Secret
    assert recorded(client) == first and secrets(client) == [first]
    assert granted(client) == [first] and mounted(client) == first
    assert not ctl._tokens._made  # recorded: nothing kept
