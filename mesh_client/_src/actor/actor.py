"""The base class of every actor.

``ProcMesh.spawn(name, Cls)`` returns an :class:`~.actor_mesh.ActorMesh` typed as ``Cls`` (as
Monarch's does), so that ``mesh.method.call(x)`` is checked against the method. For the type
checker alone, :class:`Actor` therefore also declares what an actor mesh offers beside its
endpoints (``slice``, ``initialized``, ``stop``); at run time an actor has none of them.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Self  # typing.Self is 3.11+; this import never runs

    from mesh_client._src.actor.shape import Extent
    from mesh_client._src.runtime.futures import Future


class Actor:
    """Subclass this and decorate methods with ``@endpoint``.

    An actor handles its messages one at a time, in the order each caller sent them. Its
    ``__init__`` runs in the proc, with the arguments given to ``ProcMesh.spawn``.
    """

    def __cleanup__(self, exc: BaseException | None) -> None:
        """Called when the actor is stopped (normally or because its proc stops)."""

    @functools.cached_property
    def logger(self) -> logging.Logger:
        """The logger named for the actor's class, at DEBUG, as Monarch's ``Actor.logger``.

        It has no handler of its own: records go to the proc's root handlers, or without any
        to Python's last resort (WARNING and above, to ``sys.stderr``, whose lines reach the
        controller prefixed ``[<mesh> rank <r>]``). A proc's root logger is at INFO, as in
        Monarch, until ``ProcMesh.logging_option(level=...)`` changes it.
        """
        named = logging.getLogger(type(self).__name__)
        named.setLevel(logging.DEBUG)
        return named

    if TYPE_CHECKING:  # what the ActorMesh returned by spawn offers (see the module docstring)

        @property
        def initialized(self) -> Future[None]: ...

        @property
        def extent(self) -> Extent: ...

        @property
        def sizes(self) -> dict[str, int]: ...

        def size(self, dim: str | Sequence[str] | None = None) -> int: ...

        def slice(self, **dims: int | slice) -> Self: ...

        def flatten(self, name: str) -> Self: ...

        def rename(self, **names: str) -> Self: ...

        def stop(self, reason: str = "stopped by client") -> Future[None]: ...
