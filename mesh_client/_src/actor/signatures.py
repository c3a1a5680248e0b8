"""Arguments checked against an endpoint's (or ``__init__``'s) parameters where the call is made.

Monarch binds a call's arguments to the method's signature before it sends anything, so a
wrong call raises ``TypeError`` at the caller's line instead of failing in the actor (an
``ActorError``), or, for a spawn, instead of a failed ``__init__`` (a supervision event).
:mod:`.proc_mesh` makes one :class:`ArgumentCheck` per endpoint at spawn and one for the
``__init__``; :mod:`.actor_mesh` runs it in every adverb. Checks travel with a pickled actor
mesh, so an actor calling a mesh it was sent checks too: they keep only each parameter's
name, kind and whether it has a default, as builtins (no annotations, no default values), so
they always pickle, stay small and load fast (the ``Signature`` is built at the first bind).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
#: More positional arguments than any call passes (a bound that no count of them reaches).
NEVER = sys.maxsize


#: One parameter as a check keeps it: its name, its kind (``inspect.Parameter``'s, as an int)
#: and whether it has a default. Builtins only, so a pickled check is small and quick to load.
Param = tuple[str, int, bool]

#: Accepted call shapes remembered per check (a bind depends only on the shape, not the values).
MAX_SHAPES = 64


class ArgumentCheck:
    """``check(args, kwargs)`` raises ``TypeError`` when the method could not take them.

    ``least``/``most``: the counts of positional arguments alone that need no bind (a call
    site tests them inline, a frame cheaper than calling the check). Other calls bind once per
    shape (the count of positional arguments and the keywords' names): a shape that bound is
    remembered, so a call with keywords pays a bind only the first time."""

    __slots__ = ("_params", "_what", "least", "most", "_signature", "_shapes")

    def __init__(self, params: tuple[Param, ...], what: str) -> None:
        self._params = params
        self._what = what  # "r.echo()", for the error
        positional = [p for p in params if p[1] in _POSITIONAL]
        required_keywords = any(kind == inspect.Parameter.KEYWORD_ONLY and not has_default
                                for _, kind, has_default in params)
        self.least = NEVER if required_keywords else sum(1 for p in positional if not p[2])
        self.most = NEVER if any(p[1] == inspect.Parameter.VAR_POSITIONAL for p in params) else len(positional)
        self._signature: inspect.Signature | None = None  # built at the first bind
        self._shapes: set[tuple[int, tuple[str, ...]]] = set()

    def __call__(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        if not kwargs and self.least <= len(args) <= self.most:
            return
        self.bind(args, kwargs)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """The whole check (``__call__`` without its quick pass)."""
        shape = (len(args), tuple(kwargs))
        if shape in self._shapes:
            return
        if self._signature is None:
            self._signature = inspect.Signature([
                inspect.Parameter(name, inspect._ParameterKind(kind),
                                  default=None if has_default else inspect.Parameter.empty)
                for name, kind, has_default in self._params])
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._what}: {exc}") from None
        if len(self._shapes) < MAX_SHAPES:
            self._shapes.add(shape)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArgumentCheck, (self._params, self._what))


def of(fn: Callable[..., Any], skip: int, what: str) -> ArgumentCheck | None:
    """The check for ``fn`` without its first ``skip`` parameters (``self``, an explicit
    response port); None where Python cannot read its signature (nothing is checked then)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())
    if len(params) < skip or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[:skip]):
        return None  # (self, *args): what it takes is not ours to judge
    return ArgumentCheck(tuple((p.name, int(p.kind), p.default is not p.empty) for p in params[skip:]), what)


def of_endpoints(cls: type, names: Iterable[str], mesh_name: str, explicit_port: str) -> dict[str, ArgumentCheck]:
    """One check per endpoint of ``cls`` (an explicit-response-port endpoint's port is not an
    argument of the call), keyed by name."""
    checks = {}
    for name in names:
        if isinstance(inspect.getattr_static(cls, name, None), (staticmethod, classmethod)):
            continue  # no self to skip: rare enough to leave to the actor
        fn = getattr(cls, name)
        check = of(fn, 2 if getattr(fn, explicit_port, False) else 1, f"{mesh_name}.{name}()")
        if check is not None:
            checks[name] = check
    return checks
