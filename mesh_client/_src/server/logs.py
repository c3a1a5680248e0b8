"""Log records made inside an actor name it: ``[actor=<root>.<mod.Class name{'gpus': 0/2}>] msg``.

As Monarch does, so that interleaved logs of many actors stay readable. Installed once per proc
by :mod:`.actors` when the first actor is constructed, as a log-record factory (so every handler,
including ones added later, sees the prefix); off with ``mesh_client.options.prefix_logs_with_actor``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from mesh_client._src.actor import context as ctx_mod
from mesh_client._src.actor.options import options


@functools.cache
def prefix_with_actor() -> None:
    previous = logging.getLogRecordFactory()

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        instance = ctx_mod.context().actor_instance
        # Empty messages carry structured logs (torch.compile's traces): leave them alone.
        if options.prefix_logs_with_actor and instance.creator is not None and record.msg:
            prefix = f"[actor={instance}] "
            record.actor_prefix = prefix
            record.msg = f"{prefix}{record.msg}"
        return record

    logging.setLogRecordFactory(make)
