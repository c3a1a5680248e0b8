"""``@endpoint``: marks the actor methods that callers may reach, and types their adverbs.

At run time the decorator only tags the function, so inside the actor ``self.method(x)`` stays
an ordinary call. For type checkers it returns an :class:`Endpoint`, so that
``mesh.method.call(x)`` checks ``x`` against the method's parameters and gives each adverb its
own return type (as Monarch's ``Endpoint`` protocol does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    NoReturn,
    ParamSpec,
    Protocol,
    TypeVar,
    overload,
)

if TYPE_CHECKING:
    from mesh_client._src.actor.value_mesh import ValueMesh
    from mesh_client._src.runtime.futures import Future

P = ParamSpec("P")
R = TypeVar("R")

MARK = "__procmesh_endpoint__"
EXPLICIT_PORT = "__procmesh_explicit_response_port__"  # the method gets a Port first and sends through it
CONCURRENT = "__procmesh_concurrent__"  # an async endpoint that runs beside the actor's next messages
UNTRACED = "__procmesh_untraced__"  # instrument=False: no tracing span around each invocation

# Monarch's ``propagate``: how its tensor engine infers the shapes an endpoint returns for
# ``rref``. procmesh has no tensor engine (no ``rref``), so, as in Monarch for every endpoint not
# used with distributed tensors, a valid value changes nothing; an invalid one is refused.
Propagator = Literal["cached", "inspect", "mocked"] | Callable[..., Any] | None
PROPAGATE_MODES = ("cached", "inspect", "mocked")


def check_propagate(propagate: object, where: str) -> None:
    """Refuse a ``propagate`` that Monarch would not take (its ``Propagator`` type)."""
    if propagate is None or callable(propagate) or propagate in PROPAGATE_MODES:
        return
    raise TypeError(
        f"{where}(propagate={propagate!r}): give None, one of {', '.join(map(repr, PROPAGATE_MODES))} or a "
        "callable (Monarch's tensor-engine shape propagation; procmesh has no rref, so it changes nothing here)"
    )


class Endpoint(Protocol, Generic[P, R]):
    """What ``actor_mesh.method`` offers; each adverb's return type says what it means."""

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Future[ValueMesh[R]]:
        """Send to every actor of the (sliced) mesh; gather one value per point."""
        ...

    def call_one(self, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Send to the only actor of the mesh; an error unless the mesh has exactly one."""
        ...

    def choose(self, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Send to one actor picked at random."""
        ...

    def stream(self, *args: P.args, **kwargs: P.kwargs) -> Iterator[Future[R]]:
        """Send to every actor; yield futures in the order their results arrive."""
        ...

    def broadcast(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Send to every actor without waiting; no delivery guarantee, errors go to the proc's log."""
        ...

    def rref(self, *args: P.args, **kwargs: P.kwargs) -> NoReturn:
        """Monarch's distributed-tensor result (its tensor engine, which procmesh does not have):
        raises NotImplementedError saying what to use instead."""
        ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...


@overload
def endpoint(method: Callable[Concatenate[Any, P], Awaitable[R]]) -> Endpoint[P, R]: ...


@overload
def endpoint(method: Callable[Concatenate[Any, P], R]) -> Endpoint[P, R]: ...


@overload
def endpoint(
    method: None = None,
    *,
    propagate: Propagator = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Callable[[Callable[Concatenate[Any, P], R]], Endpoint[P, R]]: ...


def endpoint(
    method: Callable[..., Any] | None = None,
    *,
    propagate: Propagator = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Any:
    """Make an actor method callable through actor meshes (``def`` or ``async def``).

    Args:
        method: the method, when used bare as ``@endpoint``.
        propagate: Monarch's tensor-engine shape propagation for ``rref`` (None, ``"cached"``,
            ``"inspect"``, ``"mocked"`` or a callable); checked, and otherwise without effect, as
            in Monarch for endpoints not used with distributed tensors (procmesh has no rref).
        instrument: when True (the default), each invocation runs inside an OpenTelemetry span
            named for the method, as Monarch's tracing spans; without ``opentelemetry-api`` in
            the proc, or with no tracer provider set there, no span is made.
        explicit_response_port: the method receives a ``Port`` as its first argument and sends
            its result (``port.send(v)``) or error (``port.exception(e)``) through it; its return
            value is ignored.

    Example::

        class Counter(Actor):
            @endpoint
            def add(self, n: int) -> int: ...

        counters.add.call(1).get()
    """

    check_propagate(propagate, "endpoint")

    def mark(fn: Callable[..., Any]) -> Any:
        if not callable(fn):
            raise TypeError(f"@endpoint decorates methods, not {type(fn).__name__}")
        setattr(fn, MARK, True)
        if explicit_response_port:
            setattr(fn, EXPLICIT_PORT, True)
        if not instrument:
            setattr(fn, UNTRACED, True)
        return fn

    return mark(method) if method is not None else mark


@overload
def concurrent_endpoint(method: Callable[Concatenate[Any, P], Awaitable[R]]) -> Endpoint[P, R]: ...


@overload
def concurrent_endpoint(
    method: None = None,
    *,
    propagate: Propagator = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Callable[[Callable[Concatenate[Any, P], Awaitable[R]]], Endpoint[P, R]]: ...


def concurrent_endpoint(
    method: Callable[..., Any] | None = None,
    *,
    propagate: Propagator = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Any:
    """An async endpoint whose body runs as a background task of the actor's event loop, so the
    actor takes its next message without waiting for it (Monarch's ``@concurrent_endpoint``).
    It takes the options of :func:`endpoint`."""
    check_propagate(propagate, "concurrent_endpoint")

    def mark(fn: Callable[..., Any]) -> Any:
        import inspect

        where = getattr(fn, "__qualname__", fn)
        if is_endpoint(fn):
            raise ValueError(f"@concurrent_endpoint does not wrap @endpoint: {where} should use one of the two")
        if not inspect.iscoroutinefunction(fn):
            raise ValueError(f"@concurrent_endpoint can only wrap async endpoints: make {where} an async def")
        setattr(fn, CONCURRENT, True)
        return endpoint(propagate=propagate, explicit_response_port=explicit_response_port, instrument=instrument)(fn)

    return mark(method) if method is not None else mark


def is_endpoint(obj: Any) -> bool:
    return callable(obj) and getattr(obj, MARK, False) is True


def endpoint_names(cls: type) -> frozenset[str]:
    """Names of the endpoints of an actor class, inherited ones included."""
    return frozenset(name for name in dir(cls) if not name.startswith("__") and is_endpoint(getattr(cls, name, None)))


def endpoint_kinds(cls: type, names: frozenset[str]) -> dict[str, bool]:
    """Each endpoint of ``names``: whether it is an ``async def``."""
    import inspect

    return {name: inspect.iscoroutinefunction(getattr(cls, name)) for name in names}


def check_endpoint_kinds(cls: type, names: frozenset[str]) -> None:
    """Refuse an actor mixing ``def`` and ``async def`` endpoints, as Monarch does at spawn."""
    kinds = endpoint_kinds(cls, names)
    sync = sorted(n for n, is_async in kinds.items() if not is_async)
    async_ = sorted(n for n, is_async in kinds.items() if is_async)
    if sync and async_:
        raise ValueError(
            f"{cls!r} mixes both async and sync endpoints. Synchronous endpoints cannot be mixed with async "
            f"endpoints because they can cause the asyncio loop to deadlock if they wait. sync: {sync} async: {async_} "
            "(make them all one kind, or set mesh_client.options.mixed_endpoints = True)"
        )


def plain_method_names(cls: type) -> frozenset[str]:
    """Public methods of an actor class that are not endpoints (``as_endpoint`` reaches them)."""
    return frozenset(
        name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name, None)) and not is_endpoint(getattr(cls, name))
    )
