"""status.procTable: the columns a big mesh publishes instead of listing its procs.

Aspects: rank intervals both ways; encode then decode gives back the entries, whatever each proc
knows (unbound, no IP, GPU or not, several phases); refusals of malformed tables; which meshes
list; the CRD declares every field the encoding writes.
"""

import pathlib

import pytest
import yaml

from mesh_client._src import contract

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("ranks", "text"), [
    ([], ""), ([0], "0"), ([0, 1, 2, 3], "0-3"), ([0, 1, 2, 3, 5, 7, 8, 9], "0-3,5,7-9"),
    ([4095], "4095"), ([1, 3], "1,3"),
])
def test_rank_intervals(ranks, text):
    assert contract.format_ranks(ranks) == text
    assert contract.parse_ranks(text) == ranks


def test_rank_intervals_sort_and_drop_duplicates():
    assert contract.format_ranks([5, 1, 2, 2, 0]) == "0-2,5"


@pytest.mark.parametrize("text", ["a", "1-", "-1", "1,,2", "1-b", "0-3;5"])
def test_malformed_rank_intervals_are_refused(text):
    with pytest.raises(ValueError, match="rank intervals"):
        contract.parse_ranks(text)


DIMS = [("hosts", 3), ("gpus", 4)]


def entries(gpus: bool) -> list[dict]:
    """Twelve procs in every state an entry can show."""
    out = []
    for rank in range(12):
        coords = contract.coords_of(rank, DIMS)
        e: dict = {"rank": rank, "coords": coords, "pod": contract.pod_name("big", rank),
                   "ready": False}
        if rank != 11:  # rank 11: no pod yet
            e["podPhase"] = "Pending" if rank == 10 else "Running"
            if rank < 10:
                e["node"] = f"node-{coords['hosts']}"
                e["address"] = f"127.250.0.{rank + 1}:26600"
                e["ready"] = rank != 4
                if gpus:
                    e["gpu"] = f"GPU-{rank % 4}"
            if rank == 9:
                e["podPhase"] = "Terminating"
                e["ready"] = False
                del e["address"]
        out.append(e)
    return out


@pytest.mark.parametrize("gpus", [False, True])
def test_decode_inverts_encode(gpus):
    procs = entries(gpus)
    table = contract.encode_proc_table(procs)
    assert table["ready"] == "0-3,5-8"
    assert table["nodes"] == ["node-0", "node-1", "node-2"]
    assert table["node"][-2:] == [-1, -1]
    assert bool(table["gpus"]) is gpus
    assert contract.decode_proc_table(table, "big", DIMS) == procs


def merge(old, patch):
    """RFC 7386 merge patch, as the API server applies the operator's status patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(old) if isinstance(old, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def test_a_table_merged_over_an_older_one_says_only_what_is_true_now():
    # A GPU mesh fully restarted: no GPU and no address known yet for the new pods.
    before = contract.encode_proc_table(entries(True))
    fresh = [{"rank": r, "coords": p["coords"], "pod": p["pod"], "ready": False}
             for r, p in enumerate(entries(True))]
    after = merge(before, contract.encode_proc_table(fresh))
    assert after == contract.encode_proc_table(fresh)  # no old GPU or port left behind
    assert contract.decode_proc_table(after, "big", DIMS) == fresh


def test_status_procs_reads_either_form():
    procs = entries(True)
    spec = {"hosts": 3, "perHost": [{"name": "gpus", "size": 4}]}
    listed = {"metadata": {"name": "big"}, "spec": spec, "status": {"procs": procs}}
    tabled = {"metadata": {"name": "big"}, "spec": spec,
              "status": {"procs": [], "procTable": contract.encode_proc_table(procs)}}
    assert contract.status_procs(listed) == contract.status_procs(tabled) == procs
    assert contract.status_procs({"metadata": {"name": "big"}, "spec": spec}) == []


def test_a_table_of_another_shape_is_refused():
    table = contract.encode_proc_table(entries(False))
    with pytest.raises(ValueError, match="has 12 procs, its shape"):
        contract.decode_proc_table(table, "big", [("hosts", 2), ("gpus", 4)])
    table["podIPs"] = table["podIPs"][:-1]
    with pytest.raises(ValueError, match="columns of lengths"):
        contract.decode_proc_table(table, "big", DIMS)


def test_entries_out_of_rank_order_or_on_two_ports_are_refused():
    procs = entries(False)
    with pytest.raises(ValueError, match="has rank"):
        contract.encode_proc_table(procs[1:])
    procs[1]["address"] = "127.250.0.2:26601"
    with pytest.raises(ValueError, match="several ports"):
        contract.encode_proc_table(procs)


def test_which_meshes_list_their_procs():
    assert contract.lists_procs(contract.MAX_LISTED_PROCS)
    assert not contract.lists_procs(contract.MAX_LISTED_PROCS + 1)


def test_the_crd_declares_every_field_of_the_table():
    crd = yaml.safe_load((ROOT / "crds" / "procmesh.yaml").read_text())
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    declared = status["properties"]["procTable"]
    table = contract.encode_proc_table(entries(True))
    assert set(table) <= set(declared["properties"])
    assert set(table["phases"][0]) <= set(declared["properties"]["phases"]["items"]["properties"])
    assert f"more than {contract.MAX_LISTED_PROCS} procs" in " ".join(declared["description"].split())
