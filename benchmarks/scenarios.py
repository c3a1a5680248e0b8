"""The one registry of fault scenarios, and the context each runs in.

:mod:`benchmarks.faults` (floods, fail-fast; the command line) and :mod:`benchmarks.fault_kills`
(kills on a local control plane) register their scenarios here with :func:`scenario`; the
command line in :mod:`benchmarks.faults` parses the arguments once and runs them. A scenario
that needs a cluster asks :meth:`Context.cluster`, so one control plane serves every kill
scenario of a run and a run of floods only starts none.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

Figures = dict[str, Any]


@dataclasses.dataclass
class Context:
    """What a scenario gets: the parsed arguments, and a cluster started on first use."""

    args: argparse.Namespace
    stack: contextlib.ExitStack
    open_cluster: Callable[[], contextlib.AbstractContextManager[Any]] | None = None
    _cluster: Any = None

    def cluster(self) -> Any:
        """The run's control plane with the operator (started once, torn down at exit)."""
        if self._cluster is None:
            if self.open_cluster is None:
                raise RuntimeError("this run has no cluster environment; pass open_cluster")
            self._cluster = self.stack.enter_context(self.open_cluster())
        return self._cluster


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    help: str
    run: Callable[[Context], Figures]


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, help: str) -> Callable[[Callable[[Context], Figures]],
                                               Callable[[Context], Figures]]:
    """Register ``fn(context) -> figures`` under ``name`` (in the order of registration)."""

    def register(fn: Callable[[Context], Figures]) -> Callable[[Context], Figures]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is registered twice")
        SCENARIOS[name] = Scenario(name, help, fn)
        return fn

    return register


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``("a.b", value)`` pairs of a nested dict of figures (lists are left out)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif not isinstance(obj, list):
        yield prefix, obj
