"""A mesh's dimensions as the operator uses them: ordered and named, the last one local.

A ProcMesh's dimensions are ``hosts`` followed by ``perHost`` (DESIGN.md); a mesh without perHost
is ``hosts`` alone, one proc per host (Monarch's ``spawn_procs()``): its local index is always 0,
as in a local dimension of size 1. Ranks are row-major over
them, counted by :mod:`mesh_client._src.contract` (the client counts the same way). Used by
:mod:`.rendering` (labels, PROCMESH_COORDS), :mod:`.placing` (the local index picks the pinned
device) and :mod:`.statuses` (``status.procs[].coords``).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from mesh_client._src import contract

#: The largest shape whose coordinates are tabled (a table is about 250 bytes a point).
TABLE_MAX_POINTS = 16384


@dataclasses.dataclass(frozen=True)
class Dimensions:
    """An ordered list of ``(name, size)`` dimensions, sizes at least 1."""

    dims: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.dims)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.dims)

    @functools.cached_property
    def size(self) -> int:
        """The number of points (procs); computed once (status and rendering ask per proc)."""
        return math.prod(self.sizes)

    @property
    def local_size(self) -> int:
        """How many procs share a host (:func:`contract.local_size`: the last dimension's size)."""
        return contract.local_size(self.names, self.sizes)

    def coords(self, rank: int) -> dict[str, int]:
        """The coordinates of ``rank`` (row-major: the last dimension varies fastest), a fresh
        dict. From a table made once per shape: every status of a mesh and every pod of it
        asks for each rank's, thousands of times per reconcile of a big mesh."""
        if 0 <= rank < self.size <= TABLE_MAX_POINTS:
            return dict(_coords_table(self.dims)[rank])
        return contract.coords_of(rank, self.dims)

    def rank(self, coords: dict[str, int]) -> int:
        """The rank of a point given by its coordinates (inverse of :meth:`coords`)."""
        return contract.rank_of(coords, self.dims)

    def host_of(self, rank: int) -> int:
        """The index along the first dimension (``hosts``) of ``rank``."""
        return contract.unravel(rank, self.sizes)[0]

    def local_index(self, rank: int) -> int:
        """``rank``'s index among its host's procs (:func:`contract.local_index`)."""
        return contract.local_index(self.names, contract.unravel(rank, self.sizes))


def mesh_dimensions(hosts: int, per_host: list[tuple[str, int]]) -> Dimensions:
    """The dimensions of a ProcMesh: ``hosts`` then the ``perHost`` dimensions in order."""
    return Dimensions(((contract.HOSTS_DIM, hosts), *per_host))


@functools.lru_cache(maxsize=64)
def _coords_table(dims: tuple[tuple[str, int], ...]) -> tuple[dict[str, int], ...]:
    """Every rank's coordinates in ``dims`` (never handed out: :meth:`Dimensions.coords` copies)."""
    return tuple(contract.coords_of(rank, dims) for rank in range(math.prod(s for _, s in dims)))
