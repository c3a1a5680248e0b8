"""revive() of a mesh reached through the API server (``via_api_server=True``) by a client
that may not list pods: the lost proc is asked who it is at the address the status now shows.

Aspect: that address is new (the operator restarted the proc in a new pod, with a new IP), so
the port-forward opener must know which pod serves it (the rank's pod name never changes);
before it did not, the probe failed with a KeyError taken for "does not answer yet", and
reconnect waited out its whole timeout and raised MeshNotReady for a proc that was back.
"""

import socket
import types

import pytest

from mesh_client._src.actor.procs import Revived
from mesh_client._src.kubernetes import attaching, forwarding, portforwards

OLD = ("10.0.0.7", 26600)
NEW = ("10.0.0.9", 26600)


class NoListingApi:
    """A client that may not list pods (the branch where each lost proc is asked)."""

    namespace = "ns"

    def __init__(self):
        configuration = types.SimpleNamespace(host="https://api.example:6443", auth_settings=lambda: {})
        self.api_client = types.SimpleNamespace(configuration=configuration)

    def visible_pods(self, mesh):
        return None


@pytest.fixture
def forwards(monkeypatch):
    """Port-forwards as URLs, each answered by one end of a socketpair."""
    urls = []
    sockets = []

    def websocket(configuration, url, headers, timeout):
        urls.append(url)
        return object()

    class FakeForward:
        def __init__(self, ws, port):
            self.socket, far = socket.socketpair()
            sockets.extend([self.socket, far])
            self.port, self.error = port, None

        def close(self):
            self.socket.close()

    monkeypatch.setattr(forwarding, "_websocket", websocket)
    monkeypatch.setattr(portforwards, "PortForward", FakeForward)
    yield urls
    for s in sockets:
        s.close()


def test_restarted_proc_at_a_new_address_is_reached_through_its_pod(monkeypatch, forwards):
    mesh = {"metadata": {"name": "m", "uid": "0123456789"},
            "spec": {"restartPolicy": "RestartProc", "maxRestarts": 3},
            "status": {"restarts": 1, "procs": [
                {"rank": 0, "pod": "m-0", "address": f"{NEW[0]}:{NEW[1]}", "ready": True}]}}
    api = NoListingApi()
    owner = attaching.KubernetesProcs(api, mesh, ["m-0"], created=False)
    owner.timeout = 0.5
    owner.forwarded = {OLD: "m-0"}  # what connect_mesh mapped at attach
    owner.opener = forwarding.port_forward_opener(api.api_client, api.namespace, owner.forwarded)
    owner.group = types.SimpleNamespace(
        peers=[types.SimpleNamespace(lost="connection reset", identity={"boot": "before"})],
        addresses=[OLD], token=b"t")
    monkeypatch.setattr(attaching, "wait_ready", lambda api, name, timeout: mesh)

    def identify_proc(address, token, timeout=5.0, opener=None):
        opener(address, timeout).close()
        return {"mesh": "m", "rank": 0, "boot": "after"}

    monkeypatch.setattr(attaching.identifying, "identify_proc", identify_proc)

    assert owner.revive([0]) == {0: Revived(NEW, True)}
    assert forwards and all("/pods/m-0/portforward?ports=26600" in url for url in forwards)
    assert owner.forwarded[NEW] == "m-0"  # the new proc's connection is forwarded too
