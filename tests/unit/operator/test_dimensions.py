"""Rank arithmetic: row-major order, round trips, the hosts and local dimensions."""

import pytest

from procmesh_operator import dimensions


def test_row_major_coords():
    s = dimensions.mesh_dimensions(2, [("gpus", 3)])
    assert s.size == 6
    assert [s.coords(r) for r in (0, 1, 3, 5)] == [
        {"hosts": 0, "gpus": 0}, {"hosts": 0, "gpus": 1},
        {"hosts": 1, "gpus": 0}, {"hosts": 1, "gpus": 2}]


@pytest.mark.parametrize("dims", [[("a", 1)], [("a", 2), ("b", 3)], [("x", 4), ("y", 1), ("z", 2)]])
def test_round_trip(dims):
    s = dimensions.mesh_dimensions(3, dims)
    assert [s.rank(s.coords(r)) for r in range(s.size)] == list(range(s.size))


def test_host_and_local_index():
    s = dimensions.mesh_dimensions(2, [("node", 2), ("gpus", 4)])
    assert [s.host_of(r) for r in (0, 7, 8, 15)] == [0, 0, 1, 1]
    assert [s.local_index(r) for r in (0, 5, 11)] == [0, 1, 3]
    assert s.local_size == 4


def test_out_of_range():
    s = dimensions.mesh_dimensions(1, [("gpus", 2)])
    with pytest.raises(IndexError):
        s.coords(2)
    with pytest.raises(IndexError):
        s.rank({"hosts": 0, "gpus": 2})
