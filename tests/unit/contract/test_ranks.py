"""Row-major rank arithmetic, and the three places that count ranks agree on it.

Aspects: unravel and ravel are inverse; out-of-range ranks and coordinates are refused; the
operator's pod coordinates, the actor layer's points and the SPMD environment's RANK give the
same rank for every point; the operator's local index and size (devices, claims) are the SPMD
environment's LOCAL_RANK and LOCAL_WORLD_SIZE, a mesh of hosts alone (local 0 of 1) included.
"""

import itertools

import pytest

from mesh_client._src import contract
from mesh_client._src.actor import shape as actor_shape
from mesh_client._src.spmd import elastic_env
from procmesh_operator import dimensions

SHAPES = [[("hosts", 1), ("gpus", 1)], [("hosts", 2), ("gpus", 3)],
          [("hosts", 3), ("node", 2), ("gpus", 4)], [("hosts", 2), ("x", 1), ("y", 3)], [("hosts", 3)]]


def test_last_dimension_varies_fastest():
    assert [contract.unravel(r, [2, 3]) for r in range(6)] == list(itertools.product(range(2), range(3)))


@pytest.mark.parametrize("dims", SHAPES)
def test_round_trip(dims):
    sizes = [s for _, s in dims]
    for rank in range(contract.ravel([s - 1 for s in sizes], sizes) + 1):
        assert contract.ravel(contract.unravel(rank, sizes), sizes) == rank
        assert contract.rank_of(contract.coords_of(rank, dims), dims) == rank


def test_out_of_range_is_refused():
    with pytest.raises(IndexError, match="outside a mesh of 6"):
        contract.unravel(6, [2, 3])
    with pytest.raises(IndexError, match="gpus=3"):
        contract.rank_of({"hosts": 0, "gpus": 3}, [("hosts", 2), ("gpus", 3)])
    with pytest.raises(IndexError, match="2 coordinates given for 1"):
        contract.ravel([0, 0], [4])


@pytest.mark.parametrize("dims", SHAPES)
def test_operator_client_and_spmd_count_alike(dims):
    operator = dimensions.mesh_dimensions(dims[0][1], dims[1:])
    client = actor_shape.Shape([n for n, _ in dims], [s for _, s in dims])
    labels, sizes = [n for n, _ in dims], [s for _, s in dims]
    for point in client.points():
        coords = operator.coords(point.rank)
        assert coords == dict(point)
        assert client.index(coords) == point.rank == operator.rank(coords)
        env = elastic_env.torchelastic_env(coords, labels, sizes, master_addr="h", master_port=1,
                                           run_id="r")
        assert env["RANK"] == str(point.rank)
        assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (str(operator.local_index(point.rank)),
                                                                str(operator.local_size))
