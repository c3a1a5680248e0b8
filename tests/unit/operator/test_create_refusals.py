"""A pod create the API server refused, said as what the user can act on.

Aspects: a full quota is a wait; Pod Security, a quota that counts unset requests, a LimitRange
and any other admission refusal need a change; a server error is no refusal.
"""

from mesh_client._src import contract
from procmesh_operator import create_refusals, kubeclient


def classify(message, status=403, procs=1):
    return create_refusals.classify("m-3", kubeclient.ApiError(status, "Forbidden", message), procs)


def test_a_full_quota_waits_for_room():
    refusal = classify('pods "m-3" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=1, '
                       'used: nvidia.com/gpu=8, limited: nvidia.com/gpu=8')
    assert refusal.reason == contract.WAITING_FOR_QUOTA and refusal.waits
    assert refusal.message.startswith(
        "the API server refused proc pod m-3 (403 Forbidden): pods \"m-3\" is forbidden")


def test_what_needs_a_change_names_the_field_to_change():
    cases = {
        'pods "m-3" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true':
            "spec.template.securityContext",
        'pods "m-3" is forbidden: failed quota: q: must specify requests.cpu for: proc-server':
            "spec.template.resources (requests, and limits where named)",
        'pods "m-3" is forbidden: maximum cpu usage per Container is 500m, but limit is 1':
            "A LimitRange of the namespace",
        'admission webhook "policy.example.com" denied the request: no latest tags':
            "An admission check of the namespace",
        'pods is forbidden: User "system:serviceaccount:ops:procmesh" cannot create resource '
        '"pods" in API group "" in the namespace "team-a"':
            "The operator's service account may not create pods in this namespace",
    }
    for message, advice in cases.items():
        refusal = classify(message)
        assert refusal.reason == contract.POD_REFUSED and not refusal.waits
        assert message in refusal.message and advice in refusal.message, refusal.message
    assert classify("Pod \"m-3\" is invalid: spec.containers[0].securityContext", 422).reason == \
        contract.POD_REFUSED


def test_a_server_error_is_no_refusal():
    assert classify("etcdserver: request timed out", 500) is None
    assert classify("the server is currently unable to handle the request", 503) is None


def test_a_quota_not_counted_yet_is_a_short_wait():
    refusal = classify('pods "m-3" is forbidden: status unknown for quota: q, resources: pods')
    assert refusal.reason == contract.WAITING_FOR_QUOTA
    assert "once the quota controller has counted" in refusal.message


def test_a_pod_bigger_than_the_whole_quota_is_no_wait():
    refusal = classify('pods "m-3" is forbidden: exceeded quota: q, requested: pods=1,requests.cpu=8, '
                       'used: pods=0,requests.cpu=0, limited: pods=5,requests.cpu=4')
    assert refusal.reason == contract.POD_REFUSED
    assert "asks for more requests.cpu than the namespace's whole ResourceQuota" in refusal.message
    room = classify('pods "m-3" is forbidden: exceeded quota: q, requested: requests.memory=1Gi, '
                    'used: requests.memory=3584Mi, limited: requests.memory=4Gi')
    assert room.reason == contract.WAITING_FOR_QUOTA  # fits once 512Mi more is free


def test_a_namespace_being_deleted_and_what_is_no_answer_are_no_refusals():
    assert classify('pods "m-3" is forbidden: unable to create new content in namespace t because '
                    'it is being terminated') is None
    assert create_refusals.classify("m-3", kubeclient.Unanswered("no answer in 60 s")) is None


def test_a_quota_below_the_whole_mesh_is_no_wait():
    full = ('pods "m-3" is forbidden: exceeded quota: q, requested: pods=1,requests.cpu=2, '
            'used: pods=3,requests.cpu=6, limited: pods=4,requests.cpu=8')
    assert classify(full, procs=4).reason == contract.WAITING_FOR_QUOTA  # 4 x 2 cpu fit in 8
    refusal = classify(full, procs=5)  # 5 pods, 10 cpu: never, whatever frees
    assert refusal.reason == contract.POD_REFUSED and not refusal.waits
    assert "The mesh's 5 proc pods together ask for more pods, requests.cpu than" in refusal.message
