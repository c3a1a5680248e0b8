"""Arguments checked against an endpoint's (or ``__init__``'s) parameters where the call is made.

Monarch binds a call's arguments to the method's signature before it sends anything, so a
wrong call raises ``TypeError`` at the caller's line instead of failing in the actor (an
``ActorError``), or, for a spawn, instead of a failed ``__init__`` (a supervision event).
:mod:`.proc_mesh` makes one :class:`ArgumentCheck` per endpoint at spawn and one for the
``__init__``; :mod:`.actor_mesh` runs it in every adverb. Checks travel with a pickled actor
mesh, so an actor calling a mesh it was sent checks too: they keep only each parameter's
name, kind and whether it has a default (no annotations, no default values), so they always
pickle and stay small.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class ArgumentCheck:
    """``check(args, kwargs)`` raises ``TypeError`` when the method could not take them."""

    __slots__ = ("_signature", "_what", "_least", "_most")

    def __init__(self, signature: inspect.Signature, what: str) -> None:
        self._signature = signature
        self._what = what  # "r.echo()", for the error
        params = list(signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        required_keywords = any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params)
        # Calls with positional arguments only, in range, need no bind (most calls: no cost).
        self._least = math.inf if required_keywords else sum(1 for p in positional if p.default is p.empty)
        self._most = math.inf if any(p.kind is p.VAR_POSITIONAL for p in params) else len(positional)

    def __call__(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        if not kwargs and self._least <= len(args) <= self._most:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._what}: {exc}") from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArgumentCheck, (self._signature, self._what))


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
    kept = [p.replace(default=None if p.default is not p.empty else p.empty, annotation=p.empty) for p in params[skip:]]
    return ArgumentCheck(signature.replace(parameters=kept, return_annotation=inspect.Signature.empty), what)


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
