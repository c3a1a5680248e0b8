"""Drops kopf's "Handler '<id>' succeeded." log line for the operator's event handlers.

kopf logs that line (INFO, logger ``kopf.objects``) after every handler run, so for the pod
watch it is one line per pod event: thousands per big mesh start, each formatted as JSON and
written, about 7 % of the operator's CPU at 6,400 pods in a py-spy profile, and it says
nothing (failures are still logged). Installed by :mod:`.__main__`; the handler ids are those
:mod:`.handlers` registers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

#: The event handlers whose success is not worth a line each (see handlers.register).
EVENT_HANDLERS = ("mesh_event", "pod_event", "workload_event", "node_event")


class HandlerSuccessFilter(logging.Filter):
    """Rejects kopf's success line of the named handlers; every other record passes."""

    def __init__(self, handler_ids: Iterable[str] = EVENT_HANDLERS) -> None:
        super().__init__()
        # kopf's id of a handler defined inside handlers.register: 'register.<locals>.pod_event'
        names = "|".join(re.escape(h) for h in handler_ids)
        self._line = re.compile(rf"Handler '(?:[\w.<>]+\.)?(?:{names})' succeeded\.")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.endswith(" succeeded.")
                    and self._line.fullmatch(record.msg) is not None)


def install(logger_name: str = "kopf.objects") -> HandlerSuccessFilter:
    """Add the filter to kopf's per-object logger (once per process)."""
    target = logging.getLogger(logger_name)
    for existing in target.filters:
        if isinstance(existing, HandlerSuccessFilter):
            return existing
    installed = HandlerSuccessFilter()
    target.addFilter(installed)
    return installed
