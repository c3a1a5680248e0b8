"""The slim pod the operator caches (procmesh_operator.projections) answers every reader alike.

Aspects: each pod reader (status entries, readiness, failure, gang gates and binding, the GPU a
proc was given, exit stories, node-loss tolerations, the gang's fit) gives the same answer on a
full pod as the API returns it and on its projection; the projection drops the bulk (managed
fields, the service account volume, image IDs) and is a fixed point; the store and the pod
handler keep projections only.
"""

import json

from mesh_client._src import contract
from procmesh_operator import (
    assigned_gpus,
    fitting,
    ganging,
    losses,
    planning,
    proc_entries,
    projections,
    rendering,
    statuses,
    stores,
)

from .builders import mesh, pod

NOW = "2026-12-01T00:00:00Z"
NODE = {"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {}, "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}}


def full(p, *, waiting=None, terminated=None, gated=False):
    """``p`` with what the API server adds: defaults, managed fields, volumes, statuses."""
    p["metadata"].update(
        creationTimestamp=NOW, generation=1,
        managedFields=[{"manager": "procmesh-operator", "operation": "Update",
                        "fieldsV1": {"f:spec": {"f:containers": {"k:{}": {".": {}}}}}}] * 3)
    spec = p["spec"]
    spec.update(dnsPolicy="ClusterFirst", restartPolicy="Never", schedulerName="default-scheduler",
                serviceAccountName="default", enableServiceLinks=True, preemptionPolicy="Never",
                volumes=[{"name": "kube-api-access-x", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt"}]}}]}}])
    if gated:
        spec["schedulingGates"] = [{"name": contract.GANG_GATE}]
    for c in spec["containers"]:
        c.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log",
                 volumeMounts=[{"name": "kube-api-access-x", "mountPath": "/var/run/secrets"}])
        c.setdefault("resources", {})["requests"] = {"cpu": "100m", "memory": "64Mi"}
    state = ({"waiting": waiting} if waiting else {"terminated": terminated} if terminated
             else {"running": {"startedAt": NOW}})
    p["status"].update(hostIP="10.0.0.1", qosClass="Burstable", startTime=NOW,
                       containerStatuses=[{"name": contract.CONTAINER_NAME, "ready": True,
                                           "restartCount": 0, "image": "x:1",
                                           "imageID": "sha256:" + "0" * 64, "state": state}])
    return p


def pods_of(m, **kw):
    return {r: full(pod(m, r), **kw) for r in range(m.size)}


def slim(pods):
    return {r: projections.slim_pod(p) for r, p in pods.items()}


def without_times(status):
    return json.loads(json.dumps(status).replace(NOW, "T"))


def test_readers_answer_alike():
    m = mesh("m", per_host=(("gpus", 2),))
    placement = rendering.ProcPlacement(node="n1", device="GPU-1234")
    for kw in ({}, {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
               {"terminated": {"exitCode": 3, "reason": "Error"}}, {"gated": True}):
        whole = {r: full(pod(m, r, placement=placement), **kw) for r in range(m.size)}
        kept = slim(whole)
        for r in whole:
            a, b = whole[r], kept[r]
            assert proc_entries.proc_entry(m, r, a) == proc_entries.proc_entry(m, r, b)
            for reader in (planning.pod_phase, planning.is_ready, planning.is_failed,
                           planning.is_terminating, ganging.is_gated, ganging.is_bound,
                           assigned_gpus.assigned_gpu, losses.node_of, losses.evicted_by_taint,
                           stores.controller_uid, stores.mesh_key_of, fitting.requests_of):
                assert reader(a) == reader(b), reader
            assert losses.toleration_seconds(a, "node.kubernetes.io/unreachable") == \
                losses.toleration_seconds(b, "node.kubernetes.io/unreachable")
            assert ganging.ungate_patch(a) == ganging.ungate_patch(b)
        assert statuses.stuck_container(whole) == statuses.stuck_container(kept)
        plan = planning.Plan()
        assert without_times(statuses.compute_status(m, None, whole, plan, now=NOW)) == \
            without_times(statuses.compute_status(m, None, kept, plan, now=NOW))
        gang = [dict(p, spec=dict(p["spec"], nodeName=None)) for p in whole.values()]
        assert fitting.fit(gang, [NODE], []) == \
            fitting.fit([projections.slim_pod(p) for p in gang], [NODE], [])


def test_projection_drops_the_bulk_and_is_a_fixed_point():
    m = mesh("m", per_host=(("gpus", 1),))
    whole = full(pod(m, 0))
    kept = projections.slim_pod(whole)
    assert "managedFields" not in kept["metadata"] and "volumes" not in kept["spec"]
    assert "imageID" not in kept["status"]["containerStatuses"][0]
    assert len(json.dumps(kept)) < len(json.dumps(whole)) * 0.6
    assert projections.slim_pod(kept) == kept


def test_the_store_keeps_projections_only():
    m = mesh("m", per_host=(("gpus", 1),))
    store = stores.PodStore()
    store.upsert(full(pod(m, 0)))
    kept = store.pods_by_rank((m.namespace, "m"), m.uid)[0]
    assert kept == projections.slim_pod(full(pod(m, 0)))


def test_the_device_env_is_kept_and_the_rest_of_the_env_dropped():
    m = mesh("m", per_host=(("gpus", 1),))
    whole = full(pod(m, 0))
    whole["metadata"].get("annotations", {}).pop(contract.GPU_DEVICE_ANNOTATION, None)
    container = next(c for c in whole["spec"]["containers"] if c["name"] == contract.CONTAINER_NAME)
    container["env"] = [e for e in container.get("env") or []
                        if e["name"] != assigned_gpus.VISIBLE_DEVICES_ENV]
    container["env"].append({"name": assigned_gpus.VISIBLE_DEVICES_ENV, "value": "3"})
    kept = projections.slim_pod(whole)
    assert assigned_gpus.assigned_gpu(whole) == assigned_gpus.assigned_gpu(kept) == "3"
    assert [e["name"] for c in kept["spec"]["containers"] for e in c["env"]] == \
        [assigned_gpus.VISIBLE_DEVICES_ENV]
