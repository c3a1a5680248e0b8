"""Rank arithmetic for a mesh's shape: ordered named dimensions, the last one local.

A ProcMesh's shape is ``hosts`` followed by ``perHost`` (DESIGN.md); ranks are row-major over
it. Used by :mod:`.rendering` (labels, PROCMESH_COORDS), :mod:`.placing` (the local index picks
the pinned device) and :mod:`.statuses` (``status.procs[].coords``).
"""

from __future__ import annotations

import dataclasses
import math

HOSTS_DIM = "hosts"


@dataclasses.dataclass(frozen=True)
class Shape:
    """An ordered list of ``(name, size)`` dimensions, sizes at least 1."""

    dims: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.dims)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.dims)

    @property
    def size(self) -> int:
        """The number of points (procs)."""
        return math.prod(self.sizes)

    @property
    def local_size(self) -> int:
        """The size of the last (local) dimension."""
        return self.dims[-1][1]

    def coords(self, rank: int) -> dict[str, int]:
        """The coordinates of ``rank`` (row-major: the last dimension varies fastest)."""
        if not 0 <= rank < self.size:
            raise IndexError(f"rank {rank} is outside a mesh of {self.size} procs")
        out: dict[str, int] = {}
        for name, size in reversed(self.dims):
            rank, out[name] = divmod(rank, size)
        return {name: out[name] for name in self.names}

    def rank(self, coords: dict[str, int]) -> int:
        """The rank of a point given by its coordinates (inverse of :meth:`coords`)."""
        rank = 0
        for name, size in self.dims:
            index = coords[name]
            if not 0 <= index < size:
                raise IndexError(f"coordinate {name}={index} is outside size {size}")
            rank = rank * size + index
        return rank

    def host_of(self, rank: int) -> int:
        """The index along the first dimension (``hosts``) of ``rank``."""
        return rank // (self.size // self.dims[0][1])

    def local_index(self, rank: int) -> int:
        """The index along the last (local) dimension of ``rank``."""
        return rank % self.local_size


def mesh_shape(hosts: int, per_host: list[tuple[str, int]]) -> Shape:
    """The shape of a ProcMesh: ``hosts`` then the ``perHost`` dimensions in order."""
    return Shape(((HOSTS_DIM, hosts), *per_host))
