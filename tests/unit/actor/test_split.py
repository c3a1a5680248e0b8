"""``split``: one dimension becomes several, as Monarch's ``MeshTrait.split`` does.

Aspects: the new dimensions take the given sizes and infer the one left out; points keep their
row-major order, so a split shape still names the same procs and a split ValueMesh the same
values; several dimensions split at once; a size-1 dimension split into nothing disappears;
each bad request raises Monarch's ValueError with Monarch's words, and where Monarch fails by
accident (a size of 0, a bool, a name twice in one split, no sequence) a clear error instead.
"""

import pytest

from mesh_client import Shape, ValueMesh


def test_a_split_infers_the_size_left_out_and_keeps_the_procs():
    shape = Shape(["hosts", "gpus"], [1, 2], ranks=[6, 7])
    split = shape.split(gpus=("a", "b"), b=1)
    assert (split.labels, split.sizes, split.ranks) == (("hosts", "a", "b"), (1, 2, 1), (6, 7))
    assert Shape(["gpus"], [8]).split(gpus=["dp", "tp"], dp=2).sizes == (2, 4)


def test_several_dimensions_split_at_once_in_row_major_order():
    shape = Shape(["host", "gpu"], [4, 4])
    split = shape.split(host=("dp", "pp"), gpu=("tp", "cp"), pp=2, cp=2)
    assert split.labels == ("dp", "pp", "tp", "cp") and split.sizes == (2, 2, 2, 2)
    assert split.ranks == tuple(range(16))
    assert split.slice(dp=1, pp=0, tp=1, cp=1).ranks == (11,)  # host 2, gpu 3


def test_a_split_value_mesh_keeps_each_value_at_its_point():
    vm = ValueMesh(Shape(["gpus"], [4]), ["a", "b", "c", "d"])
    split = vm.split(gpus=("x", "y"), y=2)
    assert split.sizes == {"x": 2, "y": 2}
    assert split.item(x=1, y=0) == "c" and list(split.values()) == ["a", "b", "c", "d"]


def test_a_size_one_dimension_split_into_nothing_disappears():
    assert Shape(["hosts", "gpus"], [1, 3]).split(hosts=()).labels == ("gpus",)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"gpus": "ab"}, "expected a sequence of dimensions, but got 'ab'"),
        ({"gpus": ("a", "b")}, "Cannot infer size of ('a', 'b') because both b and a have unknown size. "
                               "Specify at least one as argument, e.g. b=4"),
        ({"gpus": ("a", "b"), "a": 3}, "Dimension 'gpus' of size 4 is not evenly divided by ('a', 'b') with sizes (3, '?')"),
        ({"gpus": ("a", "b"), "a": 2, "b": 3}, "Dimension 'gpus' of size 4 is not evenly divided by ('a', 'b') with sizes (2, 3)"),
        ({"gpus": (), }, "Dimension 'gpus' of size 4 is not evenly divided by () with sizes ()"),
        ({"gpus": ("a", "b"), "c": 2, "a": 2}, "unused size constraints: ('c',)"),
        ({"gpus": ("hosts", "b"), "b": 4}, "Duplicate dimension name 'hosts'"),
        ({"foo": "x"}, "'foo' is not an existing dim. Expected an integer size constraint on a new dim."),
        # Where Monarch fails by accident (KeyError, ZeroDivisionError, OverflowError, takes True as 1):
        ({"gpus": ("a", "a"), "a": 2}, "Duplicate dimension name 'a'"),
        ({"gpus": ("a", "b"), "b": 0}, "size constraint b=0 is not a size: sizes are at least 1"),
        ({"gpus": ("a", "b"), "b": -2}, "size constraint b=-2 is not a size: sizes are at least 1"),
        ({"gpus": ("a", "b"), "b": True}, "b=True is a bool, not a size"),
    ],
)
def test_bad_splits_raise_value_errors_that_say_what_was_wrong(kwargs, words):
    with pytest.raises(ValueError) as raised:
        Shape(["hosts", "gpus"], [1, 4]).split(**kwargs)
    assert words in str(raised.value)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"gpus": 2}, "gpus=2: an existing dimension is split into a sequence of new names, e.g. gpus=('a', 'b')"),
        ({"gpus": ("a", 1), "a": 4}, "dimension names are non-empty strings; got 1"),
    ],
)
def test_names_that_are_not_strings_are_type_errors(kwargs, words):
    with pytest.raises(TypeError) as raised:
        Shape(["gpus"], [4]).split(**kwargs)
    assert words in str(raised.value)
