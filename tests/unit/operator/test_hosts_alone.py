"""A ProcMesh without perHost (Monarch's ``spawn_procs()``: one proc per host, extent
``{hosts: N}``): its shape is ``hosts`` alone, so coordinates, labels and PROCMESH_COORDS name
``hosts`` only, and its local index (the pinned device, the dra request) is 0 on every host.

Aspects: the shape and its local dimension; a pod's coordinates and labels; pinned mode's device
per proc; dra mode's one request per host claim.
"""

import json

from mesh_client._src import contract
from procmesh_operator import claims, placing, planning, rendering, statuses

from .builders import SETTINGS, mesh


def env_of(pod):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


def test_the_shape_is_hosts_alone_with_one_proc_per_host():
    m = mesh("solo", hosts=3, per_host=())
    assert m.shape.dims == (("hosts", 3),) and m.size == 3
    assert [m.shape.coords(r) for r in range(3)] == [{"hosts": 0}, {"hosts": 1}, {"hosts": 2}]
    assert [m.shape.host_of(r) for r in range(3)] == [0, 1, 2]
    assert [m.shape.local_index(r) for r in range(3)] == [0, 0, 0]
    assert m.shape.local_size == 1


def test_a_pod_names_its_host_alone():
    m = mesh("solo", hosts=2, per_host=())
    pod = rendering.render_pod(m, 1, rendering.ProcPlacement(), SETTINGS)
    assert json.loads(env_of(pod)["PROCMESH_COORDS"]) == {"hosts": 1}
    coords = {k: v for k, v in pod["metadata"]["labels"].items() if k.startswith(contract.coord_label(""))}
    assert coords == {contract.coord_label("hosts"): "1"}


def test_pinned_mode_gives_every_host_its_one_device():
    m = mesh("solo", hosts=2, per_host=(), gpus={"mode": "pinned", "deviceIDs": [3]})
    assert [placing.device_for(m, r, None) for r in range(2)] == ["3", "3"]


def test_dra_mode_has_one_request_per_host_claim():
    m = mesh("solo", hosts=2, per_host=(), gpus={"mode": "dra", "deviceClassName": "gpu.nvidia.com"})
    claim = claims.render_claim(m, 1, rendering.owner_reference(m))
    assert [r["name"] for r in claim["spec"]["devices"]["requests"]] == ["gpu-0"]
    assert [claims.slot_of(m, r) for r in range(2)] == [("solo-gpus-0", "gpu-0"), ("solo-gpus-1", "gpu-0")]


def test_status_lists_each_proc_by_its_host():
    m = mesh("solo", hosts=2, per_host=())
    status = statuses.compute_status(m, None, {}, planning.Plan(), now="2026-01-01T00:00:00Z")
    assert [p["coords"] for p in status["procs"]] == [{"hosts": 0}, {"hosts": 1}]
