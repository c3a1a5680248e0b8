"""Shapes, points, slicing and value meshes, as Monarch defines them."""

import pytest

from mesh_client import Extent, Point, Shape, ValueMesh


def test_point_coordinates_are_row_major():
    extent = Extent(["hosts", "gpus"], [2, 3])
    point = Point(4, extent)
    assert dict(point) == {"hosts": 1, "gpus": 1}
    assert point.rank == 4 and point.size("gpus") == 3
    assert extent.nelements == 6


def test_int_slice_drops_the_dimension_and_keeps_proc_indices():
    shape = Shape(["hosts", "gpus"], [2, 3])
    sliced = shape.slice(hosts=1)
    assert sliced.labels == ("gpus",) and sliced.sizes == (3,)
    assert sliced.ranks == (3, 4, 5)


def test_range_slice_keeps_the_dimension():
    shape = Shape(["hosts", "gpus"], [2, 4])
    sliced = shape.slice(gpus=slice(1, 4, 2))
    assert sliced.labels == ("hosts", "gpus") and sliced.sizes == (2, 2)
    assert sliced.ranks == (1, 3, 5, 7)
    assert sliced.slice(hosts=0, gpus=1).ranks == (3,)


def test_slice_errors_say_what_was_wrong():
    shape = Shape(["gpus"], [2])
    with pytest.raises(TypeError, match="unknown dimension 'host'"):
        shape.slice(host=0)
    with pytest.raises(IndexError, match="gpus=2 is out of range"):
        shape.slice(gpus=2)


def test_sizes_must_be_positive_and_labels_unique():
    with pytest.raises(ValueError, match="at least 1"):
        Shape(["gpus"], [0])
    with pytest.raises(ValueError, match="unique"):
        Shape(["a", "a"], [1, 1])


def test_value_mesh_item_needs_every_label():
    vm = ValueMesh(Shape(["hosts", "gpus"], [2, 2]), ["a", "b", "c", "d"])
    assert vm.item(hosts=1, gpus=0) == "c"
    with pytest.raises(KeyError, match="missing coordinate"):
        vm.item(hosts=1)
    with pytest.raises(KeyError, match="unknown dimension"):
        vm.item(hosts=0, gpus=0, x=1)


def test_value_mesh_item_takes_the_indices_slice_takes():
    """Negative coordinates count from the end, as slice's do; others than integers are refused."""
    vm = ValueMesh(Shape(["hosts", "gpus"], [2, 3]), ["a", "b", "c", "d", "e", "f"])
    assert vm.item(hosts=-1, gpus=-1) == "f" == vm.slice(hosts=-1, gpus=-1).item()
    assert vm.item(hosts=0, gpus=-3) == "a"
    with pytest.raises(IndexError, match=r"gpus=-4 is out of range for size 3"):
        vm.item(hosts=0, gpus=-4)
    with pytest.raises(IndexError, match=r"gpus=3 is out of range for size 3"):
        vm.item(hosts=0, gpus=3)
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError, match=rf"gpus={bad!r}: give an int index$"):
            vm.item(hosts=0, gpus=bad)


def test_value_mesh_iterates_points_and_values():
    vm = ValueMesh(Shape(["gpus"], [3]), [10, 11, 12])
    assert [(dict(p), v) for p, v in vm] == [({"gpus": 0}, 10), ({"gpus": 1}, 11), ({"gpus": 2}, 12)]
    assert vm.values() == [10, 11, 12] and vm.values()[0] == 10  # a list, as Monarch's
    vm.values().append(13)
    assert len(vm) == 3  # a copy each time
    assert len(vm) == 3
    assert vm.slice(gpus=slice(1, 3)).item(gpus=0) == 11
    assert vm.slice(gpus=2).item() == 12
    assert vm.flatten("rank").item(rank=1) == 11


def test_value_mesh_of_a_slice_is_indexed_by_the_slice():
    # ranks of the shape point into a bigger mesh; values are laid out by the slice itself
    vm = ValueMesh(Shape(["gpus"], [2], ranks=[5, 7]), ["x", "y"])
    assert vm.item(gpus=1) == "y"


@pytest.mark.parametrize(("sizes", "message"), [
    ({"gpus": 2.7}, r"dimension 'gpus' has size 2.7; sizes are whole numbers"),
    ({"gpus": "2"}, r"dimension 'gpus' has size '2'; sizes are whole numbers"),
    ({"gpus": True}, r"dimension 'gpus' has size True"),
    ({1: 2}, r"dimension names are non-empty strings; got 1"),
    (2, r"a mesh's sizes are a dict of dimension name -> size, e.g. \{'gpus': 2\}; got 2"),
    ([2], r"a mesh's sizes are a dict"),
])
def test_sizes_that_int_would_quietly_take_are_refused(sizes, message):
    """int() took 2.7 as 2 and "2" as 2: a mesh of another size than asked, without a word."""
    with pytest.raises(TypeError, match=message):
        Shape.from_sizes(sizes)


def test_sizes_and_indices_of_any_integer_type_are_taken():
    import numpy

    shape = Shape.from_sizes({"hosts": numpy.int64(2), "gpus": 2})
    assert shape.sizes == (2, 2)
    assert shape.slice(hosts=numpy.int32(1)).ranks == (2, 3)


@pytest.mark.parametrize("index", [1.9, "1", None, True])
def test_a_slice_index_must_be_an_integer(index):
    with pytest.raises(TypeError, match=r"gpus=.*: give an int index or a slice"):
        Shape.from_sizes({"gpus": 2}).slice(gpus=index)


def test_size_of_several_dimensions_is_their_product_as_in_monarch():
    vm = ValueMesh(Shape(["hosts", "gpus"], [2, 3]), list(range(6)))
    assert [vm.size(), vm.size("gpus"), vm.size(("hosts", "gpus")), vm.size(["gpus"]), vm.size(())] == [6, 3, 6, 3, 1]
    with pytest.raises(KeyError, match="does not have dimension 'tp'"):
        vm.size(("hosts", "tp"))


def test_extents_and_value_meshes_print_as_monarch_prints_them():
    vm = ValueMesh(Shape(["hosts", "gpus"], [1, 2]), ["a", "b"])
    assert str(vm.extent) == f"{vm.extent}" == "{hosts: 1, gpus: 2}"
    assert repr(vm) == "ValueMesh({hosts: 1, gpus: 2}):\n  (({'hosts': 0/1, 'gpus': 0/2}, 'a'), ({'hosts': 0/1, 'gpus': 1/2}, 'b'))"


def test_a_missing_dimension_is_monarchs_value_error_and_a_mappings_key_error():
    extent = Extent(["hosts", "gpus"], [2, 4])
    point = Point(5, extent)
    for lookup in (lambda: point["zz"], lambda: extent["zz"]):
        with pytest.raises(ValueError, match="^Dimension 'zz' not found$"):
            lookup()
        with pytest.raises(KeyError):
            lookup()
    assert point.get("zz") is None and "zz" not in point  # Mapping's get and in still work
    assert extent.get("zz", 7) == 7 and "zz" not in extent


def test_renaming_a_dimension_the_mesh_does_not_have_is_monarchs_value_error():
    """Monarch's rename is a split, which refuses a name that is not a dimension; ours ignored it,
    so a typo (``rename(host="dp")``) silently renamed nothing."""
    vm = ValueMesh(Shape(["hosts", "gpus"], [2, 2]), list(range(4)))
    with pytest.raises(ValueError, match=r"^'host' is not an existing dim\. .*this mesh has \['hosts', 'gpus'\]"):
        vm.rename(host="dp")
    with pytest.raises(ValueError, match="unique"):
        vm.rename(hosts="gpus")
    assert vm.rename(hosts="dp", gpus="tp").sizes == {"dp": 2, "tp": 2}
    assert vm.rename(hosts="gpus", gpus="hosts").item(gpus=1, hosts=0) == 2  # a swap keeps every value
