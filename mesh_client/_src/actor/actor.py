"""The base class of every actor."""

from __future__ import annotations


class Actor:
    """Subclass this and decorate methods with ``@endpoint``.

    An actor handles its messages one at a time, in the order each caller sent them. Its
    ``__init__`` runs in the proc, with the arguments given to ``ProcMesh.spawn``.
    """

    def __cleanup__(self, exc: BaseException | None) -> None:
        """Called when the actor is stopped (normally or because its proc stops)."""
