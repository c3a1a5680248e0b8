"""``@endpoint`` options as Monarch types them: ``propagate`` and ``instrument``.

Aspects: every ``propagate`` Monarch takes is accepted (None, "cached", "inspect", "mocked", a
callable) by endpoint, concurrent_endpoint and as_endpoint; anything else is refused naming the
accepted values; ``instrument=False`` marks the method untraced, the default leaves it traced.
"""

import pytest

from mesh_client import as_endpoint, concurrent_endpoint, endpoint
from mesh_client._src.actor.endpoint import UNTRACED


@pytest.mark.parametrize("propagate", [None, "cached", "inspect", "mocked", lambda *a: None])
def test_monarchs_propagators_are_accepted(propagate):
    def method(self):
        return 1

    assert endpoint(propagate=propagate)(method) is method


@pytest.mark.parametrize("decorator", [endpoint, concurrent_endpoint])
def test_another_propagate_is_refused(decorator):
    with pytest.raises(TypeError, match=r"propagate='eager'.*'cached', 'inspect', 'mocked'"):
        decorator(propagate="eager")


def test_as_endpoint_checks_propagate_too():
    with pytest.raises(TypeError, match="as_endpoint"):
        as_endpoint(print, propagate=3)


def test_instrument_false_marks_the_method_untraced():
    @endpoint(instrument=False)
    def quiet(self):
        return None

    @endpoint
    def traced(self):
        return None

    assert getattr(quiet, UNTRACED, False) is True and not hasattr(traced, UNTRACED)
