"""A bound on how long an SPMD rank waits for its peers in torch's ``env://`` rendezvous.

torch waits for the store (rank 0's TCPStore, and every rank joining it) as long as the process
group's timeout, 30 minutes by default: when one rank's script fails before it joins, the others
sit in ``init_process_group`` that long, holding their actors (a later call to them queues behind).
A mesh-wide ``call()`` already fails at the first rank's exception (:mod:`..actor.actor_mesh`);
this ends the peers' wait too. :func:`bound_store_timeout` puts a wrapper around torch's ``env``
rendezvous handler in this proc that gives the store at most :data:`STORE_TIMEOUT_ENV` seconds
(default :data:`DEFAULT_STORE_TIMEOUT_SECONDS`; ``0``: torch's own) while it is made. Only the
rendezvous: ``init_process_group`` sets the store's timeout back to the process group's once it
has it, and the collectives keep theirs. Installed by :class:`~.actor.SPMDActor`'s
``setup_env`` (so by ``setup_torch_elastic_env`` and ``SPMDActor.main``).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

#: Seconds an SPMD rank's rendezvous store waits for its peers; 0 keeps torch's timeout.
STORE_TIMEOUT_ENV = "PROCMESH_SPMD_STORE_TIMEOUT_SECONDS"
DEFAULT_STORE_TIMEOUT_SECONDS = 300.0

_lock = threading.Lock()
_cap: list[float | None] = [None]  # the bound in force in this proc (None: torch's timeout)


def store_timeout(given: float | None, env: Mapping[str, str]) -> float | None:
    """The bound in seconds: ``given``, else the environment's, else the default; None for 0."""
    if given is None:
        text = env.get(STORE_TIMEOUT_ENV, "").strip()
        try:
            given = float(text) if text else DEFAULT_STORE_TIMEOUT_SECONDS
        except ValueError:
            raise ValueError(f"{STORE_TIMEOUT_ENV}={text!r} is not a number of seconds; "
                             f"set it to e.g. 300, or 0 for torch's own timeout") from None
    if given < 0:
        raise ValueError(f"the SPMD store timeout is {given} s; give a positive number of seconds, or 0 for torch's own")
    return given or None


def capped(timeout: timedelta, cap: float | None) -> timedelta:
    """The store's timeout: torch's (or the script's) ``timeout``, at most ``cap`` seconds."""
    return timeout if cap is None else min(timeout, timedelta(seconds=cap))


def bound_store_timeout(seconds: float | None) -> None:
    """Give torch's ``env://`` rendezvous store in this proc at most ``seconds`` (None: no bound);
    nothing to do without torch.distributed."""
    try:  # the module: ``torch.distributed.rendezvous`` as an attribute is its function
        torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")
    except ImportError:
        return

    # torch keeps its handlers in this private dict (register_rendezvous_handler refuses to
    # replace one); a torch without it gets no bound rather than an error.
    handlers: dict[str, Callable[..., Iterator[Any]]] | None = getattr(torch_rendezvous, "_rendezvous_handlers", None)
    if not isinstance(handlers, dict):
        return
    with _lock:
        _cap[0] = seconds
        original = handlers.get("env")
        if original is None or getattr(original, "_procmesh_bounded", False):
            return

        def bounded(url: str, timeout: timedelta | None = None, **kwargs: Any) -> Iterator[Any]:
            if timeout is None:
                from torch.distributed.constants import default_pg_timeout

                timeout = default_pg_timeout
            return original(url, timeout=capped(timeout, _cap[0]), **kwargs)

        bounded._procmesh_bounded = True  # type: ignore[attr-defined]
        handlers["env"] = bounded


def configured(given: float | None) -> float | None:
    """:func:`store_timeout` from this process's environment."""
    return store_timeout(given, os.environ)
