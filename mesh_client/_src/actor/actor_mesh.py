"""Actor meshes and their endpoints' adverbs: call, call_one, choose, stream, broadcast.

An :class:`ActorMesh` is a picklable reference (proc addresses, token, actor id, endpoint names),
so it can be passed to actors in other procs and called from there directly.
"""

from __future__ import annotations

import functools
import queue
import random
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, ParamSpec, TypeVar, cast

from mesh_client._src.actor import (
    context,
    messages,
    own_calls,
    restarts,
    signatures,
    trees,
    unavailable,
)
from mesh_client._src.actor.endpoint import Propagator, check_propagate
from mesh_client._src.actor.errors import NotAnEndpoint, SupervisionError
from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.actor.shape import MeshTrait, Shape
from mesh_client._src.actor.value_mesh import ValueMesh
from mesh_client._src.runtime import coalescing, futures, gathering, ops, peers
from mesh_client._src.runtime.futures import Future
from mesh_client._src.wire import envelopes, serialization

if TYPE_CHECKING:
    from mesh_client._src.actor.endpoint import Endpoint

T = TypeVar("T")


class ActorMesh(MeshTrait, Generic[T]):
    """One actor per point of a proc mesh; ``mesh.method`` gives that endpoint's adverbs."""

    def __init__(
        self,
        group: ProcGroup,
        shape: Shape,
        actor_id: str,
        name: str,
        class_name: str,
        endpoints: frozenset[str],
        spawned: Future[None] | None = None,
        class_repr: str = "",
        plain: frozenset[str] = frozenset(),
        keeper: object | None = None,
        checks: Mapping[str, signatures.ArgumentCheck] | None = None,
    ) -> None:
        self._group = group
        self._shape = shape
        self._actor_id = actor_id
        self._name = name
        self._class_name = class_name
        self._endpoints = endpoints
        self._spawned = spawned  # the __init__ replies, for meshes spawned by this process
        self._class_repr = class_repr or class_name  # repr() of the actor class, for str(mesh)
        self._plain = plain  # public methods that are not endpoints: reachable through as_endpoint
        self._bound: dict[str, ActorEndpoint[Any]] = {}
        # Shared by the spawning program's handles of this spawn and their slices (never
        # pickled): while one is alive, respawn() spawns the actors again (procs.SpawnRecord).
        self._keeper = keeper
        self._checks = checks or {}  # by endpoint: its arguments are checked before a call is sent

    def _with_shape(self, shape: Shape) -> ActorMesh[T]:
        return ActorMesh(
            self._group,
            shape,
            self._actor_id,
            self._name,
            self._class_name,
            self._endpoints,
            self._spawned,
            self._class_repr,
            self._plain,
            self._keeper,
            self._checks,
        )

    def __getattr__(self, attr: str) -> ActorEndpoint[Any] | NotAnEndpointRef:
        if attr.startswith("_"):
            raise AttributeError(attr)
        bound = self._bound.get(attr)
        if bound is not None:
            return bound
        if attr in self._plain:
            return NotAnEndpointRef(self, attr)
        if attr not in self._endpoints:
            raise NotAnEndpoint(
                f"{self._class_name}.{attr} is not an endpoint of actor mesh {self._name!r}"
                f" (endpoints: {sorted(self._endpoints)}); add a @endpoint decorator to it"
            )
        bound = self._bound[attr] = ActorEndpoint(self, attr)
        # From now on found without __getattr__ (a failed lookup costs ~3 us, once per call).
        self.__dict__[attr] = bound
        return bound

    def __reduce__(self) -> tuple[Any, ...]:
        # A reference sent elsewhere may be called over another connection: the actors must
        # exist by then (calls from here follow the spawn on the same connection).
        if self._spawned is not None and not self._spawned.done():
            self._spawned.exception()
        return (
            ActorMesh,
            (
                self._group,
                self._shape,
                self._actor_id,
                self._name,
                self._class_name,
                self._endpoints,
                None,
                self._class_repr,
                self._plain,
                None,
                self._checks,
            ),
        )

    def __repr__(self) -> str:
        """As Monarch prints it: ``ActorMesh(class=<class 'mod.Cls'>, shape={gpus=2})``."""
        shape = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"ActorMesh(class={self._class_repr}, shape={{{shape}}})"

    @property
    def initialized(self) -> Future[None]:
        """Done once every ``__init__`` has run; raises SupervisionError if one of them failed."""
        # A reference made elsewhere was pickled only once its actors existed (__reduce__).
        return self._spawned if self._spawned is not None else futures.completed(None)

    def stop(self, reason: str = "stopped by client") -> Future[None]:
        """Stop these actors (their ``__cleanup__`` runs); the procs stay."""
        group = self._group
        group.spawns.pop(self._actor_id, None)  # nothing to respawn after a restart
        context.disown(self._actor_id, len(self._shape))
        # An actor on a proc this client stopped went with it: stopping it again is done already.
        live = [i for i, p in enumerate(self._shape.ranks) if p not in group.stopping]
        if trees.routed(self) and live:  # behind the calls sent through the tree before it
            what = f"stop of {self._name}"
            stops = trees.send(self, None, what, live, (), True, reason)
            trees.forget_route(self._actor_id)
            return gather(stops, lambda values: None, fail_fast=peers.is_lost)
        trees.forget_route(self._actor_id)
        futs = [
            group.peers[p].request(
                (ops.STOP_ACTOR, self._actor_id, reason),
                (),
                functools.partial(messages.decode_reply, f"stop of {self._name}", group.displays[p]),
            )
            for p in (self._shape.ranks[i] for i in live)
        ]
        return gather(futs, lambda values: None, fail_fast=peers.is_lost)


R = TypeVar("R")
B = TypeVar("B")
P = ParamSpec("P")


class ActorEndpoint(Generic[R]):
    """One endpoint of an actor mesh, with the adverbs of Monarch's ``Endpoint``."""

    def __init__(self, mesh: ActorMesh[Any], method: str) -> None:
        self._mesh = mesh
        self._method = method
        self._what = f"Actor call {mesh._name}.{method}"  # Monarch's words: "Actor call m.f failed"
        # Its futures' key: waits for them expect as long as the last for this endpoint of this
        # actor mesh, whatever the slice (runtime/ahead.py); a str, its hash kept.
        self._key = f"{method}@{mesh._actor_id}"
        self._fields: dict[int, bytes] = {}  # index in the slice -> the envelope fields of a call there
        self._decoders: dict[int, Callable[[Any], Any]] = {}  # index in the slice -> how its replies decode
        self._check = mesh._checks.get(method)  # None: the arguments are the actor's to judge
        # Positional-only calls with these counts need no check (tested inline in each adverb).
        self._least, self._most = (0, signatures.NEVER) if self._check is None else (self._check.least, self._check.most)

    def _decoder(self, i: int) -> Callable[[Any], Any]:
        mesh = self._mesh
        decode = self._decoders[i] = functools.partial(_decode, self._what, mesh._group.displays[mesh._shape.ranks[i]])
        return decode

    def _dumps(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[bytes | memoryview]:
        try:
            return serialization.dumps((args, kwargs))
        except Exception as exc:
            messages.raise_unpicklable(f"the arguments of {self._what}", exc, (*args, *kwargs.values()))

    def _send(self, indices: Sequence[int], args: tuple[Any, ...], kwargs: dict[str, Any], reply: bool = True,
              guard: bool = True) -> list[Future[Any]]:
        """One future per index: the call's outcome at that point of the mesh."""
        mesh = self._mesh
        if (kwargs or not self._least <= len(args) <= self._most) and self._check is not None:
            self._check.bind(args, kwargs)  # a wrong call raises TypeError here, as in Monarch
        payload = self._dumps(args, kwargs) if args or kwargs else _NO_ARGUMENTS
        if trees.routed(mesh):  # a big mesh: through a tree of its procs (trees.py says why)
            futs = trees.send(mesh, self._method, self._what, indices, payload, reply, key=self._key)
        elif len(indices) == 1 and reply:  # call_one, choose: one future, one send, no loops
            i = indices[0]
            fut: Future[Any] = Future(self._decoders.get(i) or self._decoder(i), self._key)
            self._post_one(i, payload, fut)
            futs = [fut]
        else:
            decoders = self._decoders
            key = self._key
            futs = [Future(decoders.get(i) or self._decoder(i), key) for i in indices]
            self._post(indices, payload, futs if reply else None)
            if not reply:
                for fut in futs:
                    fut.set_raw((peers.OK, None, None))
                return futs
        here = _messages_run_here() if guard else None
        if here is not None:  # in an actor: one that waits for its own call would wait for ever
            ranks = mesh._shape.ranks
            return own_calls.guard(futs, here, mesh._actor_id, [ranks[i] for i in indices], self._what)
        return futs

    def _post(self, indices: Sequence[int], payload: Sequence[Any], waiters: Sequence[peers.Waiter] | None) -> None:
        """Send the call to each index (``waiters[k]`` gets the reply of ``indices[k]``; None:
        one-way)."""
        post = self._post_one
        for k, i in enumerate(indices):
            post(i, payload, None if waiters is None else waiters[k])

    def _post_one(self, i: int, payload: Sequence[Any], waiter: peers.Waiter | None) -> None:
        """Send the call to index ``i`` of the slice. The envelope fields of each point are
        encoded once per endpoint and slice."""
        mesh = self._mesh
        group = mesh._group
        p = mesh._shape.ranks[i]
        born = group.born.get(mesh._actor_id)
        if born is not None and born[p] != group.incarnations[p]:  # its actor died with the old proc
            error = SupervisionError(f"{messages.endpoint_call(self._what)} failed: {restarts.gone_message(group, p, mesh._name)}")
            if waiter is not None:
                waiter.set_raw((peers.LOST, str(error), error))  # lost, so a gather fails fast on it
            return
        fields = self._fields.get(i)
        if fields is None:
            shape = mesh._shape
            fields = self._fields[i] = envelopes.request_fields((mesh._actor_id, self._method, i, shape.labels, shape.sizes))
        group.peers[p].submit(waiter, _CALL, fields, payload)

    def call(self, *args: Any, **kwargs: Any) -> Future[ValueMesh[R]]:
        """Every actor of the mesh; the future gives a ValueMesh, or raises the first failure to
        arrive (an actor's exception with its remote traceback, or a dead proc), at once."""
        mesh = self._mesh
        shape, group = mesh._shape, mesh._group
        n = len(shape)
        # The first failure fails the whole call at once, as in Monarch: the others may be
        # waiting for the failed one forever (a collective, an SPMD rendezvous with a dead or
        # failed peer), so their replies are not worth waiting for.
        result: Future[ValueMesh[R]]
        if trees.routed(mesh):
            futs = self._send(range(n), args, kwargs, guard=False)  # the whole is guarded: members must fail fast
            result = gather(futs, lambda values: ValueMesh(shape, values), fail_fast=messages.failed, key=self._key)
        else:
            if (kwargs or not self._least <= len(args) <= self._most) and self._check is not None:
                self._check.bind(args, kwargs)  # a wrong call raises TypeError here, as in Monarch
            payload = self._dumps(args, kwargs)
            what, displays, ranks = self._what, group.displays, shape.ranks

            def decode(i: int, raw: Any) -> Any:
                return _decode(what, displays[ranks[i]], raw)

            # One object counts the replies: no future, lock pair or done callback per member.
            whole: gathering.Gather[ValueMesh[R]] = gathering.Gather(n, decode, lambda values: ValueMesh(shape, values),
                                                                     _failed, self._key)
            self._post(range(n), payload, [whole.slot(i) for i in range(n)])
            result = whole.future
        here = _messages_run_here()
        if here is not None:  # in an actor: one that waits for its own call would wait for ever
            return own_calls.guard_one(result, here, mesh._actor_id, shape.ranks, self._what)
        return result

    def call_one(self, *args: Any, **kwargs: Any) -> Future[R]:
        n = len(self._mesh._shape.ranks)  # len(shape), without its __len__ frame
        if n != 1:
            raise ValueError(
                f"call_one requires exactly 1 actor, but mesh has {n}; slice it first, e.g. mesh.slice(gpus=0)"
            )
        return self._send((0,), args, kwargs)[0]

    def choose(self, *args: Any, **kwargs: Any) -> Future[R]:
        return self._send((random.randrange(len(self._mesh._shape)),), args, kwargs)[0]

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Future[R]]:
        """One future per actor, in the order they complete; a dead proc's raises SupervisionError."""
        futs = self._send(range(len(self._mesh._shape)), args, kwargs)
        arrived: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
        for fut in futs:
            fut.add_done_callback(arrived.put)
        own = any(isinstance(fut, own_calls.OwnCall) for fut in futs)  # this actor is among them

        def in_arrival_order() -> Iterator[Future[R]]:
            for yielded in range(len(futs)):
                coalescing.waiting()  # about to wait: held requests go out now (runtime/coalescing.py)
                if own and arrived.empty():  # raises if only its own call is left, which never comes
                    own_calls.refuse_stream_wait(futs, len(futs) - yielded)
                yield arrived.get()

        return in_arrival_order()

    def broadcast(self, *args: Any, **kwargs: Any) -> None:
        self._send(range(len(self._mesh._shape)), args, kwargs, reply=False)

    def rref(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Monarch's call that returns a distributed tensor (its tensor engine): refused."""
        unavailable.tensor_engine(f"{self._mesh._name}.{self._method}.rref()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{self._mesh._name}.{self._method} is an endpoint of a remote actor mesh; "
            f"use .call(...), .call_one(...), .choose(...), .stream(...) or .broadcast(...)"
        )


# Looked up once: these run for every call.
_CALL, _OK = ops.CALL, peers.OK
_messages_run_here = context.messages_run_here
_NO_ARGUMENTS = (serialization.NO_ARGUMENTS,)  # the payload of a call without arguments (never changed)


def _decode(what: str, where: str, raw: tuple[int, Any, Any]) -> Any:
    """A member's outcome; one whose proc restarted under its actor carries the error to raise."""
    status = raw[0]
    if status == _OK:  # a result: what messages.decode_reply does, without its frames
        data = raw[1]
        try:
            return serialization.loads(data) if data else None
        except Exception as exc:
            raise messages.undecodable(what, where, exc) from None
    if status == peers.LOST and isinstance(raw[2], BaseException):
        raise raw[2]
    return messages.decode_reply(what, where, raw)


def _failed(raw: tuple[int, Any, Any]) -> bool:
    """Whether a member's raw outcome fails a ``call()`` at once (an error, a dead actor or proc)."""
    return raw[0] != peers.OK


class NotAnEndpointRef:
    """``mesh.method`` for a method without ``@endpoint``: its adverbs refuse, saying how to fix
    it; ``as_endpoint(mesh.method)`` calls it anyway."""

    def __init__(self, mesh: ActorMesh[Any], method: str) -> None:
        self._mesh = mesh
        self._method = method

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NotAnEndpoint(
            f"{self._mesh._class_name}.{self._method} is not an endpoint of actor mesh {self._mesh._name!r}; "
            f"add a @endpoint decorator to it, or call it through as_endpoint(mesh.{self._method})"
        )

    call = call_one = choose = stream = broadcast = __call__ = _refuse


def as_endpoint(
    method: Callable[P, R], *, propagate: Propagator = None, explicit_response_port: Literal[False] = False
) -> Endpoint[P, R]:
    """Treat a method of a spawned actor that is not an ``@endpoint`` as one:
    ``as_endpoint(mesh.method).call(...)``. ``propagate`` is checked as ``@endpoint`` checks it."""
    check_propagate(propagate, "as_endpoint")
    if explicit_response_port:
        raise NotImplementedError("as_endpoint(..., explicit_response_port=True) is not supported; decorate the method instead")
    # At run time ``mesh.method`` is an ActorEndpoint or a NotAnEndpointRef, whatever the
    # checker sees (the mesh is typed as its actor class, see ProcMesh.spawn).
    found: object = method
    if isinstance(found, ActorEndpoint):
        return cast("Endpoint[P, R]", found)
    if isinstance(found, NotAnEndpointRef):
        return cast("Endpoint[P, R]", ActorEndpoint(found._mesh, found._method))
    raise TypeError(f"as_endpoint takes a method of an actor mesh (mesh.method), not {type(method).__name__}")


def gather(
    futs: list[Future[Any]],
    build: Callable[[list[Any]], B],
    *,
    fail_fast: Callable[[Future[Any]], bool] | None = None,
    key: Hashable | None = None,
) -> Future[B]:
    """One future for many: done when all are, then ``build([values])`` (first error raises).

    A member for which ``fail_fast`` says so completes the whole at once, with that member's
    error, without waiting for the others. ``key``: the future's (:class:`Future`).
    """
    failed: list[Future[Any]] = []

    def decode(_: object) -> B:
        if failed:
            error = failed[0].exception()
            if error is not None:
                raise error
        return build([f.get() for f in futs])

    out: Future[B] = Future(decode, key)
    if not futs:
        out.set_raw(None)
        return out
    remaining = [len(futs)]
    lock = threading.Lock()

    def one_done(fut: Future[Any]) -> None:
        if fail_fast is not None and fail_fast(fut):
            with lock:
                if not failed:
                    failed.append(fut)
            out.set_raw(None)  # no-op if the whole is already complete
            return
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_raw(None)

    for fut in futs:
        fut.add_done_callback(one_done)
    return out
