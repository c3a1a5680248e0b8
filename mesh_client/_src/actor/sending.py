"""``send`` and ``Accumulator``: Monarch's lower-level ways to call an endpoint.

``send(endpoint, args, kwargs, port=None, selection="all")`` calls every actor (or one chosen
at random) and, given a :class:`~.ports.Port`, sends each result there; ``Accumulator`` folds the
results of a ``call`` into one value.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from mesh_client._src.actor.actor_mesh import ActorEndpoint, gather
from mesh_client._src.actor.ports import Port
from mesh_client._src.runtime.futures import Future

R = TypeVar("R")
A = TypeVar("A")


def send(
    endpoint: ActorEndpoint[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    port: Port[Any] | None = None,
    selection: Literal["all", "choose"] = "all",
) -> None:
    """Send one message per selected actor; results (or errors) go to ``port`` if given."""
    n = len(endpoint._mesh._shape)
    indices = range(n) if selection == "all" else (random.randrange(n),)
    if selection not in ("all", "choose"):
        raise ValueError(f"selection must be 'all' or 'choose', got {selection!r}")
    futs = endpoint._send(indices, args, kwargs, reply=port is not None)
    if port is None:
        return
    for fut in futs:
        fut.add_done_callback(lambda f: _forward(f, port))


def _forward(fut: Future[Any], port: Port[Any]) -> None:
    error = fut.exception()
    if error is None:
        port.send(fut.get())
    else:
        port.exception(error)


class Accumulator(Generic[R, A]):
    """``Accumulator(mesh.method, identity, combine).accumulate(*args)``: a Future of the fold of
    ``combine`` over every actor's result, starting from ``identity``."""

    def __init__(self, endpoint: ActorEndpoint[R], identity: A, combine: Callable[[A, R], A]) -> None:
        self._endpoint = endpoint
        self._identity = identity
        self._combine = combine

    def accumulate(self, *args: Any, **kwargs: Any) -> Future[A]:
        futs = self._endpoint._send(range(len(self._endpoint._mesh._shape)), args, kwargs)

        def fold(values: list[R]) -> A:
            acc = self._identity
            for value in values:
                acc = self._combine(acc, value)
            return acc

        return gather(futs, fold)
