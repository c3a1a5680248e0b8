"""``ProcMesh.to_table()``: a mesh's procs drawn as Monarch 0.7 draws them.

Monarch draws a proc mesh through its tensor engine's device mesh: each proc is
``<host>.gpu[<local>]``, its rank in the root mesh split by the root's ``gpus`` size (1 without
one), in a grid whose columns are the last dimension, rows the one before, and one grid per
index of a third; the dimension names label the axes. The same text here, so that a ported
program prints the same table. Pure: :mod:`.proc_mesh` gives it the shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from mesh_client._src.actor.shape import Shape

#: Monarch's tables have up to three axes: a grid per index of the first of three.
MAX_DIMENSIONS = 3
_BAR = "\u2502"  # what separates the row axis's name from its grid


def proc_table(shape: Shape, gpus_per_host: int) -> str:
    """The table of ``shape``'s procs; ValueError for a mesh of 0 or more than 3 dimensions."""
    ndim = len(shape.labels)
    if not 1 <= ndim <= MAX_DIMENSIONS:
        raise ValueError(f"to_table draws meshes of 1, 2 or 3 dimensions, as Monarch's does; this one has {ndim} "
                         f"({dict(zip(shape.labels, shape.sizes))}): slice or flatten it first, e.g. "
                         "procs.flatten('procs').to_table()")
    cells = [f"{r // gpus_per_host}.gpu[{r % gpus_per_host}]" for r in shape.ranks]
    depth = shape.sizes[0] if ndim == 3 else 1
    rows = shape.sizes[-2] if ndim > 1 else 1
    cols = shape.sizes[-1]
    col_labels = [str(i) for i in range(cols)]
    row_labels = [str(i) for i in range(rows)]
    tables = []
    for d in range(depth):
        grid_rows = [cells[(d * rows + r) * cols:(d * rows + r + 1) * cols] for r in range(rows)]
        if ndim > 1:
            grid_rows = [[row_labels[r], *row] for r, row in enumerate(grid_rows)]
        lines = _grid(["", *col_labels] if ndim > 1 else col_labels, grid_rows)
        if d == 0:
            lines.insert(0, _column_axis(shape.labels[-1], lines[0], row_labels if ndim > 1 else None))
        if ndim > 1:
            _label_rows(lines, shape.labels[-2], first=d == 0)
        header = "" if ndim < 3 else f"{shape.labels[0]}: {d}\n" if d == 0 else f"\n{shape.labels[0]}: {d}\n"
        tables.append(header + "\n".join(lines))
    return "\n".join(tables)


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A grid of right-aligned cells, each column as wide as its widest cell or its header
    and two spaces (the header row is ruled off with ``=``)."""
    widths = [max([len(h) + 2] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]

    def rule(fill: str) -> str:
        return "+" + "+".join(fill * (w + 2) for w in widths) + "+"

    def line(values: Sequence[str]) -> str:
        return "|" + "|".join(f" {v:>{w}} " for v, w in zip(values, widths)) + "|"

    out = [rule("-"), line(headers), rule("=")]
    for row in rows:
        out += [line(row), rule("-")]
    return out


def _column_axis(name: str, top: str, row_labels: Sequence[str] | None) -> str:
    """The last dimension's name, centred over the columns (past the row labels, if any)."""
    if row_labels is None:
        return f"{name:^{len(top)}}"
    left = max(len(label) for label in row_labels) + 4
    return " " * left + f"{name:^{len(top) - left}}"


def _label_rows(lines: list[str], name: str, first: bool) -> None:
    """The row dimension's name left of the grid's middle line, a bar down the grid's side;
    the first grid's column-name line is shifted to stay over its columns."""
    start = 1 if first else 0
    grid = lines[start:]
    if first:
        lines[0] = " " * (len(name) + 2) + lines[0]
    for i, text in enumerate(grid):
        lead = f"{name} {_BAR}" if i == len(grid) // 2 else f"{' ' * len(name)} {_BAR}"
        lines[start + i] = lead + text
