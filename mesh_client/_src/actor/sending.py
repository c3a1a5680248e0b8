"""``send`` and ``Accumulator``: Monarch's lower-level ways to call an endpoint.

``send(endpoint, args, kwargs, port=None, selection="all")`` calls every actor (or one chosen
at random) and, given a :class:`~.ports.Port`, sends each result there, with the actor's rank
for a ranked receiver; ``Accumulator`` folds the results of a ``call`` into one value.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, cast

from mesh_client._src.actor.actor_mesh import ActorEndpoint, gather
from mesh_client._src.actor.ports import Port
from mesh_client._src.runtime.futures import Future

if TYPE_CHECKING:
    from mesh_client._src.actor.endpoint import Endpoint

R = TypeVar("R")
A = TypeVar("A")
P = ParamSpec("P")


def _actor_endpoint(endpoint: Endpoint[P, R], where: str) -> ActorEndpoint[R]:
    """The run-time object behind ``mesh.method`` (the checker sees an Endpoint)."""
    found: object = endpoint
    if not isinstance(found, ActorEndpoint):
        raise TypeError(f"{where} takes an endpoint of an actor mesh (mesh.method), not {type(found).__name__}")
    return cast("ActorEndpoint[R]", found)


def send(
    endpoint: Endpoint[P, R],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    port: Port[R] | None = None,
    selection: Literal["all", "choose"] = "all",
) -> None:
    """Send one message per selected actor; results (or errors) go to ``port`` if given."""
    target = _actor_endpoint(endpoint, "send")
    n = len(target._mesh._shape)
    indices = range(n) if selection == "all" else (random.randrange(n),)
    if selection not in ("all", "choose"):
        raise ValueError(f"selection must be 'all' or 'choose', got {selection!r}")
    futs = target._send(indices, args, kwargs, reply=port is not None)
    if port is None:
        return
    for rank, fut in zip(indices, futs):  # a RankedPortReceiver gives (rank, value), rank in the mesh called
        fut.add_done_callback(functools.partial(_forward, port=port._ranked(rank)))


def _forward(fut: Future[Any], port: Port[Any]) -> None:
    error = fut.exception()
    if error is None:
        port.send(fut.get())
    else:
        port.exception(error)


class Accumulator(Generic[P, R, A]):
    """``Accumulator(mesh.method, identity, combine).accumulate(*args)``: a Future of the fold of
    ``combine`` over every actor's result, starting from ``identity``."""

    def __init__(self, endpoint: Endpoint[P, R], identity: A, combine: Callable[[A, R], A]) -> None:
        self._endpoint = _actor_endpoint(endpoint, "Accumulator")
        self._identity = identity
        self._combine = combine

    def accumulate(self, *args: P.args, **kwargs: P.kwargs) -> Future[A]:
        futs = self._endpoint._send(range(len(self._endpoint._mesh._shape)), args, kwargs)

        def fold(values: list[R]) -> A:
            acc = self._identity
            for value in values:
                acc = self._combine(acc, value)
            return acc

        return gather(futs, fold)
