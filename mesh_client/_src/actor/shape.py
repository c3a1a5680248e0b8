"""Named, ordered mesh dimensions and slicing, shared by proc, actor and value meshes.

A :class:`Shape` is labels, sizes and, for each point in row-major order (counted by
:mod:`mesh_client._src.contract`, as the operator counts ranks), the index of the proc (in the
root mesh) that the point stands for. Slicing keeps those indices, so a slice of a slice
still knows which procs it means.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from mesh_client._src import contract


class DimensionNotFound(KeyError, ValueError):
    """A label that is not one of the mesh's dimensions: Monarch's ValueError, and a KeyError as a
    mapping's lookup must raise (so ``get`` and ``in`` work, and handlers written for either
    catch it)."""

    def __init__(self, label: object) -> None:
        super().__init__(label)
        self.label = label

    def __str__(self) -> str:
        return f"Dimension {self.label!r} not found"


class Extent(Mapping[str, int]):
    """Sizes by label, in order: ``Extent(["hosts", "gpus"], [2, 4])``."""

    __slots__ = ("labels", "sizes")

    def __init__(self, labels: Sequence[str], sizes: Sequence[int]) -> None:
        self.labels = tuple(labels)
        self.sizes = tuple(sizes)

    @property
    def nelements(self) -> int:
        return math.prod(self.sizes)

    def __getitem__(self, label: str) -> int:
        try:
            return self.sizes[self.labels.index(label)]
        except ValueError:
            raise DimensionNotFound(label) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return "Extent(" + ", ".join(f"{k}={v}" for k, v in zip(self.labels, self.sizes)) + ")"

    def __str__(self) -> str:
        """As Monarch prints it: ``{hosts: 2, gpus: 4}``."""
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(self.labels, self.sizes)) + "}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Extent) and (self.labels, self.sizes) == (other.labels, other.sizes)

    def __hash__(self) -> int:
        return hash((self.labels, self.sizes))


class EmptySliceError(ValueError, IndexError):
    """A slice that selects no point: Monarch's ValueError (a bad value), and an IndexError as
    procmesh raised before, so handlers written for either catch it."""


class Point(Mapping[str, int]):
    """A position in an extent: coordinates by label, and ``rank``, the row-major index."""

    __slots__ = ("rank", "extent", "_coords")

    def __init__(self, rank: int, extent: Extent) -> None:
        self.rank = rank
        self.extent = extent
        self._coords = contract.unravel(rank, extent.sizes)

    def size(self, label: str) -> int:
        return self.extent[label]

    def __getitem__(self, label: str) -> int:
        try:
            return self._coords[self.extent.labels.index(label)]
        except ValueError:
            raise DimensionNotFound(label) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.extent.labels)

    def __len__(self) -> int:
        return len(self.extent.labels)

    def __str__(self) -> str:
        """As Monarch prints it: ``{'hosts': 0/2, 'gpus': 1/4}`` (each coordinate over its size)."""
        return "{" + ", ".join(f"{k!r}: {v}/{n}" for k, v, n in zip(self.extent.labels, self._coords, self.extent.sizes)) + "}"

    __repr__ = __str__  # as Monarch's, so a list or dict of points prints as it does there

    def __eq__(self, other: object) -> bool:
        """Same rank in the same extent, as Monarch's Point compares; never equal to a dict (there
        ``point == {"gpus": 0}`` is False, so code written here that relied on it broke on Monarch
        without a word): compare ``dict(point)`` instead."""
        if isinstance(other, Point):
            return self.rank == other.rank and self.extent == other.extent
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.rank, self.extent))


class Shape:
    """Labels and sizes, plus the root-mesh index of each point (row-major)."""

    __slots__ = ("labels", "sizes", "ranks")

    def __init__(self, labels: Sequence[str], sizes: Sequence[int], ranks: Sequence[int] | None = None) -> None:
        self.labels = tuple(labels)
        self.sizes = tuple(int(s) for s in sizes)
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"mesh labels must be unique, got {list(self.labels)}")
        for label, size in zip(self.labels, self.sizes):
            if size < 1:
                raise ValueError(f"dimension {label!r} has size {size}; sizes must be at least 1")
        n = math.prod(self.sizes)
        self.ranks = tuple(range(n)) if ranks is None else tuple(ranks)
        if len(self.ranks) != n:
            raise ValueError(f"{len(self.ranks)} ranks for a shape of {n} points")

    @classmethod
    def from_sizes(cls, sizes: Mapping[str, int]) -> Shape:
        """A mesh's shape as its user gives it (``per_host={"gpus": 2}``): checked, since ``int()``
        would take ``2.7`` as 2 and ``"2"`` as 2 without a word."""
        if not isinstance(sizes, Mapping):
            raise TypeError(f"a mesh's sizes are a dict of dimension name -> size, e.g. {{'gpus': 2}}; got {sizes!r}")
        for label, size in sizes.items():
            if not isinstance(label, str) or not label:
                raise TypeError(f"dimension names are non-empty strings; got {label!r} in {dict(sizes)!r}")
            if not _is_index(size):
                raise TypeError(f"dimension {label!r} has size {size!r}; sizes are whole numbers (int)")
        return cls(list(sizes), list(sizes.values()))

    @property
    def extent(self) -> Extent:
        return Extent(self.labels, self.sizes)

    def __len__(self) -> int:
        return len(self.ranks)

    def __repr__(self) -> str:
        return f"Shape({dict(zip(self.labels, self.sizes))})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and (self.labels, self.sizes, self.ranks) == (
            other.labels,
            other.sizes,
            other.ranks,
        )

    def point(self, index: int) -> Point:
        return Point(index, self.extent)

    def points(self) -> Iterator[Point]:
        extent = self.extent
        return (Point(i, extent) for i in range(len(self.ranks)))

    def index(self, coords: Mapping[str, int]) -> int:
        """The row-major index of fully specified coordinates (negative ones count from the end,
        as in :meth:`slice`)."""
        extra = set(coords) - set(self.labels)
        if extra:
            raise KeyError(f"unknown dimension(s) {sorted(extra)}; this mesh has {list(self.labels)}")
        missing = [label for label in self.labels if label not in coords]
        if missing:
            raise KeyError(f"missing coordinate(s) {missing}; give every dimension of {list(self.labels)}")
        return contract.ravel([_position(label, coords[label], size) for label, size in zip(self.labels, self.sizes)],
                              self.sizes)

    def slice(self, **dims: int | slice) -> Shape:
        """An int drops the dimension, a slice keeps it restricted."""
        for label in dims:
            if label not in self.labels:
                raise TypeError(f"unknown dimension {label!r}; this mesh has {list(self.labels)}")
        selected: list[list[int]] = []
        labels: list[str] = []
        for label, size in zip(self.labels, self.sizes):
            sel = dims.get(label, slice(None))
            if isinstance(sel, slice):
                picks = list(range(size))[sel]
                if not picks:
                    raise EmptySliceError(f"slice {sel} of dimension {label!r} (size {size}) selects nothing; "
                                          f"a slice keeps indices 0 to {size - 1}")
                labels.append(label)
                selected.append(picks)
            else:
                selected.append([_position(label, sel, size, "an int index or a slice")])
        ranks = [self.ranks[contract.ravel(combo, self.sizes)] for combo in itertools.product(*selected)]
        sizes = [len(s) for s, label in zip(selected, self.labels) if label in labels]
        return Shape(labels, sizes, ranks)

    def flatten(self, name: str) -> Shape:
        return Shape([name], [len(self.ranks)], self.ranks)

    def rename(self, **names: str) -> Shape:
        """Monarch's ``rename`` (a split of each dimension into one new name): a name that is not
        a dimension raises its ValueError; it was ignored, so a typo renamed nothing."""
        for label in names:
            if label not in self.labels:
                raise ValueError(f"'{label}' is not an existing dim. Expected an integer size constraint on a new dim."
                                 f" rename() renames existing dimensions: this mesh has {list(self.labels)}")
        return Shape([names.get(label, label) for label in self.labels], self.sizes, self.ranks)

    def split(self, **kwargs: Sequence[str] | int) -> Shape:
        """Monarch's ``split``: ``gpus=("a", "b")`` replaces dimension gpus with a and b, in that
        order; a new name given as ``b=2`` has that size, and one name per split may be left
        out, to take what divides evenly. Row-major order is kept, so every point keeps its proc
        and only the labels change. The errors Monarch raises are raised with its words."""
        splits: dict[str, tuple[str, ...]] = {}
        constraints: dict[str, int] = {}
        for key, value in kwargs.items():
            if key in self.labels:
                splits[key] = _split_names(key, value)
            else:
                if not _is_index(value):
                    raise ValueError(f"'{key}' is not an existing dim. Expected an integer size constraint on a new dim."
                                     + (f" {key}={value!r} is a bool, not a size" if isinstance(value, bool) else ""))
                if operator.index(value) < 1:  # type: ignore[arg-type]
                    raise ValueError(f"size constraint {key}={value!r} is not a size: sizes are at least 1")
                constraints[key] = operator.index(value)  # type: ignore[arg-type]
        labels: list[str] = []
        sizes: list[int] = []
        for label, size in zip(self.labels, self.sizes):
            names = splits.get(label, (label,))
            as_given = kwargs.get(label, names)  # Monarch's messages show the user's tuple or list
            unknown = [name for name in names if name not in constraints]
            if len(unknown) > 1:
                raise ValueError(f"Cannot infer size of {as_given} because both {unknown[1]} and {unknown[0]} have "
                                 f"unknown size. Specify at least one as argument, e.g. {unknown[1]}=4")
            known = math.prod(constraints[name] for name in names if name in constraints)
            fits = size % known == 0 if unknown else size == known  # the one unknown takes size // known
            if not fits:
                given = tuple(constraints.get(name, "?") for name in names)
                raise ValueError(f"Dimension '{label}' of size {size} is not evenly divided by {as_given!r} with sizes {given!r}")
            for name in names:
                if name in labels:
                    raise ValueError(f"Duplicate dimension name '{name}'")
                labels.append(name)
                sizes.append(constraints.pop(name) if name in constraints else size // known)
        if constraints:
            raise ValueError(f"unused size constraints: {tuple(constraints)}")
        return Shape(labels, sizes, self.ranks)


M = TypeVar("M", bound="MeshTrait")


class MeshTrait:
    """What every mesh offers: sizes, labels and slicing. Subclasses provide ``_shape``."""

    _shape: Shape

    def _with_shape(self: M, shape: Shape) -> M:
        raise NotImplementedError

    @property
    def extent(self) -> Extent:
        return self._shape.extent

    @property
    def sizes(self) -> dict[str, int]:
        return dict(zip(self._shape.labels, self._shape.sizes))

    @property
    def _labels(self) -> tuple[str, ...]:
        return self._shape.labels

    def size(self, dim: str | Sequence[str] | None = None) -> int:
        """The number of points: of the whole mesh (None), along one dimension, or of several
        dimensions together (``mesh.size(("hosts", "gpus"))``, their sizes multiplied), as Monarch's."""
        if dim is None:
            return len(self._shape)
        if isinstance(dim, str):
            if dim not in self._shape.labels:
                raise KeyError(f"{type(self).__name__}({self.extent}) does not have dimension {dim!r} (its dimensions: {list(self._shape.labels)})")
            return self.extent[dim]
        return math.prod(self.size(d) for d in dim)

    def __len__(self) -> int:
        return len(self._shape)

    def slice(self: M, **dims: int | slice) -> M:
        """``mesh.slice(gpus=0)`` drops a dimension; ``mesh.slice(gpus=slice(0, 2))`` narrows it."""
        return self._with_shape(self._shape.slice(**dims))

    def flatten(self: M, name: str) -> M:
        return self._with_shape(self._shape.flatten(name))

    def rename(self: M, **names: str) -> M:
        return self._with_shape(self._shape.rename(**names))

    def split(self: M, **kwargs: Sequence[str] | int) -> M:
        """Split dimensions into new ones: ``mesh.split(gpus=("dp", "tp"), tp=2)`` turns gpus of
        size 4 into dp of size 2 and tp of size 2 (the size left out is inferred). The mesh's
        points, and the procs or values behind them, keep their row-major order."""
        return self._with_shape(self._shape.split(**kwargs))


def _split_names(label: str, value: object) -> tuple[str, ...]:
    """The new names dimension ``label`` is split into, checked."""
    if isinstance(value, str):
        raise ValueError(f"expected a sequence of dimensions, but got '{value}'")  # Monarch's words
    if not isinstance(value, Sequence):
        raise TypeError(f"{label}={value!r}: an existing dimension is split into a sequence of new names, "
                        f"e.g. {label}=('a', 'b')")
    for name in value:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{label}={value!r}: dimension names are non-empty strings; got {name!r}")
    return tuple(value)


def _position(label: str, value: object, size: int, wanted: str = "an int index") -> int:
    """``value`` as a position along dimension ``label`` of ``size`` (a negative one counts from
    the end); a value that is not an integer, or out of range, raises saying so."""
    if not _is_index(value):
        raise TypeError(f"{label}={value!r}: give {wanted}")
    index = operator.index(value)  # type: ignore[arg-type]
    if not -size <= index < size:
        raise IndexError(f"{label}={index} is out of range for size {size}")
    return index % size


def _is_index(value: object) -> bool:
    """Whether ``value`` is an integer (``int``, numpy's), not a bool, nor a float or a string
    that ``int()`` would take."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True
