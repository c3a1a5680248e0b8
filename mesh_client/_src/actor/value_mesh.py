"""Results of ``call()``: one value per point of the mesh that was called."""

from __future__ import annotations

import pprint
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from mesh_client._src.actor.shape import MeshTrait, Point, Shape

R = TypeVar("R")


class ValueMesh(MeshTrait, Generic[R]):
    """Values laid out like the mesh they came from.

    >>> vm = ValueMesh(Shape(["hosts", "gpus"], [1, 2]), ["a", "b"])
    >>> vm.item(hosts=0, gpus=1)
    'b'
    >>> [(dict(p), v) for p, v in vm]
    [({'hosts': 0, 'gpus': 0}, 'a'), ({'hosts': 0, 'gpus': 1}, 'b')]
    >>> vm.slice(gpus=0).item(hosts=0)
    'a'
    """

    def __init__(self, shape: Shape, values: Sequence[R]) -> None:
        if len(values) != len(shape):
            raise ValueError(f"{len(values)} values for a mesh of {len(shape)} points")
        self._shape = Shape(shape.labels, shape.sizes)
        self._values = list(values)

    def _with_shape(self, shape: Shape) -> ValueMesh[R]:
        # ``shape`` indexes into our own positions (we re-based ranks to 0..n-1 above).
        return ValueMesh(shape, [self._values[i] for i in shape.ranks])

    def item(self, **coords: int) -> R:
        """The value at ``coords``; every dimension must be given (none on a singleton)."""
        if not coords and len(self._values) == 1:
            return self._values[0]
        return self._values[self._shape.index(coords)]

    def values(self) -> list[R]:
        """The values in row-major order: a new list, as Monarch's (``vm.values()[0]`` works)."""
        return list(self._values)

    def items(self) -> Iterator[tuple[Point, R]]:
        return zip(self._shape.points(), self._values)

    def __iter__(self) -> Iterator[tuple[Point, R]]:
        return self.items()

    def get(self, rank: int) -> R:
        return self._values[rank]

    def __repr__(self) -> str:
        """As Monarch prints it: the extent, then one ``({'gpus': 0/2}, value)`` pair a line."""
        body = pprint.pformat(tuple((_Shown(str(p)), v) for p, v in self.items()))
        return f"ValueMesh({self.extent}):\n{textwrap.indent(body, '  ')}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueMesh, (self._shape, self._values))


class _Shown:
    """Prints as its text (a point the way Monarch's reprs show it, inside ``pformat``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
