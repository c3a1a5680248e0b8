"""The operator's own pod watch against a fake of our API wrapper (kubeclient.KubeClient), as
the reconcile's tests do: list then watch, as a client-go reflector.

Aspects: the list delivers every pod projected, as type None, then the watch resumes from the
list's resourceVersion; each event is delivered projected (no managedFields), bookmarks only move
the version; a watch the server ends is made again from the newest version seen; 410 Gone and
other failures list again (after a pause for failures); the scope's path gives the namespace
that list items may leave out; globs fall back to kopf.
"""

import asyncio

import pytest

from procmesh_operator import __main__ as main_
from procmesh_operator import kubeclient, listwatch, podwatch

PATH = kubeclient.pods_path("ns")


def pod(name, rv):
    return {"metadata": {"name": name, "resourceVersion": str(rv), "uid": f"u-{name}",
                         "labels": {"procmesh.io/mesh": "m"},
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {"nodeName": "n1", "volumes": [{"name": "x"}]},
            "status": {"phase": "Running"}}


class Done(BaseException):
    """Ends the fake's script (not an Exception: the watch outlives those)."""


class FakeWatchClient:
    def __init__(self, lists, watches):
        self.lists = list(lists)  # (resourceVersion, items) per list
        self.watches = list(watches)  # a list of events, or an exception, per watch
        self.watched_from = []

    async def list_paged(self, path, *, label_selector=None, transform=None):
        assert path == PATH and label_selector == "procmesh.io/mesh"
        if not self.lists:
            raise Done()
        version, items = self.lists.pop(0)
        return {"metadata": {"resourceVersion": version},
                "items": [transform(i) for i in items]}

    async def watch(self, path, params):
        assert params["allowWatchBookmarks"] == "true"
        self.watched_from.append(params.get("resourceVersion"))
        if not self.watches:
            raise Done()
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        for event in script:
            yield event


def run(client, monkeypatch):
    got = []
    monkeypatch.setattr(listwatch, "RETRY_FIRST_SECONDS", 0.0)
    watch = podwatch.PodWatch(client, PATH, lambda kind, body: got.append((kind, body)))
    with pytest.raises(Done):
        asyncio.run(watch.run())
    return got, watch


def test_list_then_watch_from_its_version_projected(monkeypatch):
    client = FakeWatchClient(
        lists=[("10", [pod("m-0", 9)])],
        watches=[[{"type": "ADDED", "object": pod("m-1", 11)},
                  {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
                  {"type": "MODIFIED", "object": pod("m-1", 16)},
                  {"type": "DELETED", "object": pod("m-0", 17)}]])
    got, _ = run(client, monkeypatch)
    assert [(k, b["metadata"]["name"], b["metadata"]["resourceVersion"]) for k, b in got] == [
        (None, "m-0", "9"), ("ADDED", "m-1", "11"), ("MODIFIED", "m-1", "16"),
        ("DELETED", "m-0", "17")]
    assert all(b["metadata"]["namespace"] == "ns" for _, b in got)  # from the path
    assert all("managedFields" not in b["metadata"] and "volumes" not in b["spec"]
               for _, b in got)
    # The first watch from the list's version; the next (the server ended it) from the last.
    assert client.watched_from == ["10", "17"]


def test_expired_and_failed_watches_list_again(monkeypatch):
    client = FakeWatchClient(
        lists=[("10", []), ("20", [pod("m-0", 19)]), ("30", [])],
        watches=[[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
                 kubeclient.ApiError(500, "InternalError", "boom")])
    got, watch = run(client, monkeypatch)
    assert watch.lists == 3  # listed anew after the 410 and after the failure
    assert client.watched_from == ["10", "20", "30"]
    assert [(k, b["metadata"]["name"]) for k, b in got] == [(None, "m-0")]


def test_the_scope_gives_the_paths_and_globs_and_peering_fall_back_to_kopf():
    assert main_.pod_watch_paths(True, (), standalone=True) == ["/api/v1/pods"]
    assert main_.pod_watch_paths(False, ["a", "b"], standalone=True) == [
        kubeclient.pods_path("a"), kubeclient.pods_path("b")]
    assert main_.pod_watch_paths(False, ["team-*"], standalone=True) is None
    assert main_.pod_watch_paths(True, (), standalone=False) is None  # kopf pauses its own
    assert listwatch.namespace_of(kubeclient.pods_path("x")) == "x"
    assert listwatch.namespace_of(podwatch.all_namespaces_path()) is None
    assert listwatch.namespace_of(kubeclient.roles_path("y")) == "y"
    assert listwatch.namespace_of("/apis/rbac.authorization.k8s.io/v1/roles") is None
