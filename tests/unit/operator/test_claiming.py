"""The dra steps of the reconcile, against the fake API wrapper of test_reconciling.

Aspects: the claims come after the Service and before the pods, once; a colocated mesh creates
no claim and joins its partner's as a second, non-controller owner; two uncapped procs cannot
share a claimed device (the budget sees the namespace's proc pods); on a cluster that does not
serve resource.k8s.io/v1 the mesh is refused with DRANotServed and gets no pods.
"""

import asyncio
import copy

from mesh_client._src import contract
from procmesh_operator import claiming, kubeclient, reconciling, statuses

from .builders import SETTINGS, mesh_body
from .test_reconciling import FakeClient, creates

DRA = {"mode": "dra", "deviceClassName": "gpu.nvidia.com"}
CLAIMS = claiming.claims_path("ns")


class DraClient(FakeClient):
    """Also patches metadata (a colocated mesh joining a claim's owners)."""

    async def merge_patch(self, path, body):
        if "metadata" not in body or path.endswith("/status"):
            return await super().merge_patch(path, body)
        self.calls.append(("patch", path))
        meta = body["metadata"]
        assert meta["resourceVersion"] == self.objects[path]["metadata"]["resourceVersion"]
        self.objects[path]["metadata"]["ownerReferences"] = copy.deepcopy(meta["ownerReferences"])
        return copy.deepcopy(self._stamp(self.objects[path]))


class OldCluster(FakeClient):
    """A cluster before Kubernetes 1.34: no resource.k8s.io/v1."""

    def _refuse(self, path):
        if path.startswith(claiming.API_PATH):
            raise kubeclient.ApiError(404, "NotFound", "the server could not find the requested resource")

    async def get_or_none(self, path):
        self._refuse(path)
        return await super().get_or_none(path)

    async def list(self, path, *, label_selector=None):
        self._refuse(path)
        return await super().list(path, label_selector=label_selector)

    async def create(self, path, body):
        self._refuse(path)
        return await super().create(path, body)


def reconcile(client, *names):
    ctl = reconciling.Controller(client, SETTINGS)
    for name in names:
        asyncio.run(ctl.reconcile(("ns", name)))
    return ctl


def test_claims_come_before_the_pods_once():
    client = DraClient({kubeclient.mesh_path("ns", "p"): mesh_body("p", per_host=(("gpus", 2),),
                                                                     gpus=DRA)})
    ctl = reconcile(client, "p")
    assert creates(client) == ["/api/v1/namespaces/ns/secrets", kubeclient.roles_path("ns"),
                               "/api/v1/namespaces/ns/services", CLAIMS,
                               "/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods"]
    assert client.objects[f"{CLAIMS}/p-gpus-0"]["metadata"]["ownerReferences"][0]["uid"] == "uid-p"
    client.calls.clear()
    asyncio.run(ctl.reconcile(("ns", "p")))
    assert creates(client) == []


def test_a_colocated_mesh_joins_its_partners_claims():
    client = DraClient({
        kubeclient.mesh_path("ns", "p"): mesh_body("p", per_host=(("gpus", 1),),
                                                   gpus={**DRA, "memoryFraction": 0.4}),
        kubeclient.mesh_path("ns", "t"): mesh_body("t", per_host=(("gpus", 1),), colocateWith="p",
                                                   gpus={"mode": "dra", "memoryFraction": 0.5})})
    reconcile(client, "p", "t")
    assert [p for p in client.objects if p.startswith(CLAIMS)] == [f"{CLAIMS}/p-gpus-0"]
    owners = client.objects[f"{CLAIMS}/p-gpus-0"]["metadata"]["ownerReferences"]
    assert [(o["name"], o["controller"]) for o in owners] == [("p", True), ("t", False)]
    trainer_pod = client.objects["/api/v1/namespaces/ns/pods/t-0"]
    assert trainer_pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "p-gpus-0"}]


def test_uncapped_procs_cannot_share_a_claim():
    client = DraClient({
        kubeclient.mesh_path("ns", "p"): mesh_body("p", per_host=(("gpus", 1),), gpus=DRA),
        kubeclient.mesh_path("ns", "t"): mesh_body("t", per_host=(("gpus", 1),), colocateWith="p",
                                                   gpus={"mode": "dra"})})
    reconcile(client, "p", "t")
    budget = statuses.condition(client.objects[kubeclient.mesh_path("ns", "t")]["status"]
                                ["conditions"], contract.GPU_BUDGET)
    assert (budget["status"], budget["reason"]) == ("False", contract.BUDGET_EXCEEDED)
    assert "p-0=uncapped, t-0=uncapped" in budget["message"]
    assert "/api/v1/namespaces/ns/pods/t-0" not in client.objects


def test_a_cluster_without_dra_refuses_the_mesh():
    client = OldCluster({kubeclient.mesh_path("ns", "p"): mesh_body("p", per_host=(("gpus", 1),),
                                                                      gpus=DRA)})
    reconcile(client, "p")
    status = client.objects[kubeclient.mesh_path("ns", "p")]["status"]
    for type_ in (contract.READY, contract.GPU_BUDGET):
        c = statuses.condition(status["conditions"], type_)
        assert c["status"] == "False" and c["reason"] == contract.DRA_NOT_SERVED
        assert "resource.k8s.io/v1" in c["message"] and "pinned or plugin" in c["message"]
    assert not [p for p in client.objects if "/pods/" in p]
