"""The status of a big mesh stays small: procs as a table above contract.MAX_LISTED_PROCS.

Aspects: a listed mesh keeps status.procs; a 4,096-proc mesh (pinned GPUs, every pod bound and
ready, real pod UIDs) writes an empty list and a table far under etcd's 1.5 MiB object limit, which the
client's reader turns back into exactly the entries the list would have had; a suspended big
mesh deletes its table.
"""

import json
import uuid

from mesh_client._src import contract
from procmesh_operator import planning, proc_entries, rendering, statuses

from .builders import mesh, mesh_body, pod

T0 = "2026-01-01T00:00:00Z"
ETCD_LIMIT = int(1.5 * 1024 * 1024)


def big_mesh_and_pods(hosts: int = 512, per_host: int = 8):
    body = mesh_body("big", hosts=hosts, per_host=(("gpus", per_host),),
                     gpus={"mode": "pinned", "deviceIDs": list(range(per_host))})
    m = mesh("big", hosts=hosts, per_host=(("gpus", per_host),),
             gpus={"mode": "pinned", "deviceIDs": list(range(per_host))})
    pods = {}
    for rank in range(m.size):
        host, local = divmod(rank, per_host)
        node = f"kwok-node-{host}"
        pods[rank] = pod(m, rank, node=node, ip=f"10.{host // 250}.{host % 250}.{local + 2}", uid=str(uuid.UUID(int=rank)),
                         placement=rendering.ProcPlacement(node, f"GPU-{host:08x}-0000-4000-8000-{local:012x}"))
    return body, m, pods


def test_a_small_mesh_lists_its_procs():
    m = mesh(per_host=(("gpus", 2),))
    s = statuses.compute_status(m, None, {0: pod(m, 0)}, planning.Plan(), now=T0)
    assert len(s["procs"]) == 2 and "procTable" not in s


def test_a_4096_proc_status_is_a_table_far_under_the_etcd_limit():
    body, m, pods = big_mesh_and_pods()
    s = statuses.compute_status(m, None, pods, planning.Plan(), now=T0)
    listed = [proc_entries.proc_entry(m, r, pods[r]) for r in range(m.size)]
    assert s["procs"] == [] and s["procTable"]["size"] == 4096
    size = len(json.dumps(s, separators=(",", ":")))
    assert size < ETCD_LIMIT // 3  # 4,096 GPU UUIDs and pod UIDs are most of it
    assert len(json.dumps(listed, separators=(",", ":"))) > size * 2  # what it replaces
    assert contract.status_procs({**body, "status": json.loads(json.dumps(s))}) == listed


def test_a_suspended_big_mesh_deletes_its_table():
    _, m, _ = big_mesh_and_pods(hosts=64, per_host=8)
    suspended = mesh("big", hosts=64, per_host=(("gpus", 8),), suspend=True,
                     gpus={"mode": "pinned", "deviceIDs": list(range(8))})
    s = statuses.compute_status(suspended, None, {}, planning.Plan(), now=T0)
    assert s["procs"] == [] and s["procTable"] is None
    assert m.size > contract.MAX_LISTED_PROCS
