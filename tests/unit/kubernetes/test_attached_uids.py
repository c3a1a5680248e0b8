"""Attach records pod uids (to tell a restart later) without listing a big mesh's pods.

Aspects: a mesh that lists its procs in status.procs has its pods listed once and each uid
matched by pod name; a mesh above contract.MAX_LISTED_PROCS is never listed (its uids stay
unknown, which revive treats as a client that may not list pods does).
"""

from mesh_client._src import contract
from mesh_client._src.kubernetes import attaching


class ListingApi:
    """The one KubeApi method attached_uids may use."""

    def __init__(self, pods):
        self.pods = pods
        self.lists = 0

    def visible_pods(self, mesh):
        self.lists += 1
        return self.pods


class NoListingApi:
    def visible_pods(self, mesh):
        raise AssertionError("Must not be called!")


def test_small_mesh_uids_come_from_one_list():
    names = [contract.pod_name("m", r) for r in range(3)]
    api = ListingApi([{"metadata": {"name": names[2], "uid": "u2"}},
                      {"metadata": {"name": names[0], "uid": "u0"}}])
    assert attaching.attached_uids(api, "m", names) == ["u0", None, "u2"]
    assert api.lists == 1


def test_big_mesh_is_not_listed():
    size = contract.MAX_LISTED_PROCS + 1
    names = [contract.pod_name("m", r) for r in range(size)]
    assert attaching.attached_uids(NoListingApi(), "m", names) == [None] * size
