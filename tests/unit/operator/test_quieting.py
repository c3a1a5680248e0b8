"""kopf's per-event success line is dropped for our event handlers only (procmesh_operator.quieting).

Aspects: the success line of each event handler, under the id kopf gives a handler defined in
handlers.register, is dropped; another handler's success, a failure of ours and any other line
pass; installing twice adds one filter.
"""

import logging

from procmesh_operator import quieting


def record(msg):
    return logging.LogRecord("kopf.objects", logging.INFO, __file__, 1, msg, None, None)


def test_event_handler_successes_are_dropped():
    f = quieting.HandlerSuccessFilter()
    for handler in quieting.EVENT_HANDLERS:
        assert not f.filter(record(f"Handler 'register.<locals>.{handler}' succeeded."))
        assert not f.filter(record(f"Handler '{handler}' succeeded."))


def test_other_lines_pass():
    f = quieting.HandlerSuccessFilter()
    assert f.filter(record("Handler 'register.<locals>.startup' succeeded."))
    assert f.filter(record("Handler 'register.<locals>.pod_event' failed with an exception."))
    assert f.filter(record("Handler 'register.<locals>.pod_eventx' succeeded."))
    assert f.filter(record("something else succeeded."))


def test_install_is_idempotent():
    name = "test-quieting"
    quieting.install(name)
    quieting.install(name)
    assert sum(isinstance(x, quieting.HandlerSuccessFilter)
               for x in logging.getLogger(name).filters) == 1
