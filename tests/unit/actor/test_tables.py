"""``ProcMesh.to_table``'s text, as Monarch 0.7 draws it (the expected tables are Monarch's own
output for these meshes; tests/integration/monarch_parity/round_four.py compares them live).

Aspects: a grid of two dimensions, its axes named; one dimension, the name centred; a slice keeps
its ranks in the mesh it comes from; three dimensions, one grid per index of the first; meshes of
0 or 4 dimensions are refused with what to do.
"""

import pytest

from mesh_client._src.actor.shape import Shape
from mesh_client._src.actor.tables import proc_table

HOSTS_GPUS = "\n".join([
    "                           gpus               ",
    "      \u2502+----+----------+----------+----------+",
    "      \u2502|    |        0 |        1 |        2 |",
    "      \u2502+====+==========+==========+==========+",
    "hosts \u2502|  0 | 0.gpu[0] | 0.gpu[1] | 0.gpu[2] |",
    "      \u2502+----+----------+----------+----------+",
    "      \u2502|  1 | 1.gpu[0] | 1.gpu[1] | 1.gpu[2] |",
    "      \u2502+----+----------+----------+----------+",
])

SLICED = "\n".join([
    "         gpus          ",
    "+----------+----------+",
    "|        0 |        1 |",
    "+==========+==========+",
    "| 1.gpu[1] | 1.gpu[2] |",
    "+----------+----------+",
])

THREE = "\n".join([
    "a: 0",
    "                   c           ",
    "  \u2502+----+----------+----------+",
    "  \u2502|    |        0 |        1 |",
    "b \u2502+====+==========+==========+",
    "  \u2502|  0 | 0.gpu[0] | 1.gpu[0] |",
    "  \u2502+----+----------+----------+",
    "",
    "a: 1",
    "  \u2502+----+----------+----------+",
    "  \u2502|    |        0 |        1 |",
    "b \u2502+====+==========+==========+",
    "  \u2502|  0 | 2.gpu[0] | 3.gpu[0] |",
    "  \u2502+----+----------+----------+",
])


def test_two_dimensions_are_rows_and_columns_named_by_their_dimensions():
    assert proc_table(Shape(["hosts", "gpus"], [2, 3]), 3) == HOSTS_GPUS


def test_a_slice_keeps_its_ranks_in_the_mesh_it_comes_from():
    root = Shape(["hosts", "gpus"], [2, 3])
    assert proc_table(root.slice(hosts=1, gpus=slice(1, 3)), 3) == SLICED


def test_three_dimensions_give_one_grid_per_index_of_the_first():
    assert proc_table(Shape(["a", "b", "c"], [2, 1, 2]), 1) == THREE


@pytest.mark.parametrize("labels", [[], ["a", "b", "c", "d"]])
def test_other_dimension_counts_are_refused_saying_what_to_do(labels):
    with pytest.raises(ValueError, match=rf"1, 2 or 3 dimensions.*has {len(labels)} .*flatten"):
        proc_table(Shape(labels, [1] * len(labels)), 1)
