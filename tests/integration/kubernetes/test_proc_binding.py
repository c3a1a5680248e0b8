"""On the cluster, each handshake names the pod whose proc the client meant (wire/binding.py).

Aspects: the operator gives each proc its pod's UID (PROCMESH_INCARNATION) and publishes it as
status.procs[].podUID, which attach() names in every handshake (IDENTIFY answers with it); a
handshake relayed to another proc of the mesh (a TCP forwarder on 127.0.0.1, as a listener at a
pod IP given to another pod could be) is refused by that proc, naming both pods' procs, while
the same forwarder to the proc meant passes.
"""

import pytest

from mesh_client._src.runtime import identifying, peers
from mesh_client.kubernetes import attach
from tests.integration.local.actors import Recorder
from tests.integration.local.forwarder import TIMEOUT, Relay, refused_through
from tests.integration.operator.support import create_mesh, get_mesh

pytestmark = pytest.mark.cluster


def test_handshakes_name_the_pod_and_a_relay_to_another_is_refused(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "bound", hosts=1, perHost=[{"name": "gpus", "size": 2}])
    mesh = attach("bound", namespace, api_client=kube, timeout=120)
    group = mesh._group
    listed = {p["rank"]: p for p in get_mesh(custom, namespace, "bound")["status"]["procs"]}
    pods = {i: kube_uid(kube, namespace, f"bound-{i}") for i in (0, 1)}
    assert group.proc_ids == [listed[0]["podUID"], listed[1]["podUID"]] == [pods[0], pods[1]]
    assert mesh.spawn("rec", Recorder).echo.call(3).get().item(hosts=0, gpus=1) == 3  # bound calls pass

    meant = peers.meaning(group.proc_ids[0], group.displays[0])
    text, _ = refused_through(group.addresses[1], lambda address: identifying.identify_proc(
        address, group.token, timeout=TIMEOUT, meant=meant))
    assert (f"this connection was meant for proc {group.displays[0]} (incarnation {pods[0]}), but it "
            f"reached bound[hosts=0,gpus=1] (incarnation {pods[1]})") in text

    relay = Relay(group.addresses[0])
    try:
        assert identifying.identify_proc(relay.address, group.token, timeout=TIMEOUT, meant=meant)["incarnation"] == pods[0]
    finally:
        relay.close()
    mesh.stop().get()


def kube_uid(kube, namespace, pod):
    from kubernetes import client

    return client.CoreV1Api(kube).read_namespaced_pod(pod, namespace).metadata.uid
