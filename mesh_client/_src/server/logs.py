"""Log records made inside an actor name it: ``[actor=<root>.<mod.Class name{'gpus': 0/2}>] msg``.

As Monarch does, so that interleaved logs of many actors stay readable, and where Monarch does:
a filter on the proc's handlers, the root logger's and every one added later (through
``Logger.addHandler``). A record that no handler takes reaches Python's last resort (WARNING and
above, on stderr) bare, as in Monarch. Installed once per proc by :mod:`.actors` when the first
actor is constructed; off with ``mesh_client.options.prefix_logs_with_actor``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor.options import options


class _ActorPrefix(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        instance = ctx_mod.context().actor_instance
        # Empty messages carry structured logs (torch.compile's traces): leave them alone. A record
        # that passes several handlers gets the prefix once.
        if options.prefix_logs_with_actor and instance.creator is not None and record.msg \
                and not hasattr(record, "actor_prefix"):
            prefix = f"[actor={instance}] "
            record.actor_prefix = prefix
            record.msg = f"{prefix}{record.msg}"
        return True


_PREFIX = _ActorPrefix()


@functools.cache
def prefix_with_actor() -> None:
    for handler in logging.getLogger().handlers:
        handler.addFilter(_PREFIX)
    add_handler = logging.Logger.addHandler

    def add_handler_with_prefix(self: logging.Logger, handler: logging.Handler) -> None:
        add_handler(self, handler)
        handler.addFilter(_PREFIX)  # once: addFilter skips a filter it has

    wrapped: Any = functools.wraps(add_handler)(add_handler_with_prefix)
    setattr(logging.Logger, "addHandler", wrapped)  # noqa: B010 - a method of the class, replaced for every logger
