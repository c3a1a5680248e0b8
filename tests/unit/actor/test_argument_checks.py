"""A call's arguments are bound to the endpoint's parameters where it is made, as Monarch does.

Aspects: what the method takes passes (defaults, ``*args``, keyword-only, ``**kwargs``); what it
cannot take raises TypeError naming the call, with Python's words; an explicit response port is
not an argument; a check pickles without the method's defaults or annotations; a method whose
signature Python cannot read, or a staticmethod, is not checked.
"""

import pickle

import pytest

from mesh_client import Actor, endpoint
from mesh_client._src.actor import signatures
from mesh_client._src.actor.endpoint import EXPLICIT_PORT


class Echo(Actor):
    @endpoint
    def echo(self, a, b=lambda: 2, *rest, c: "unpicklable annotation" = 3, **more):  # noqa: F722
        return a

    @endpoint
    def keyword(self, *, k):
        return k

    @endpoint(explicit_response_port=True)
    def ported(self, port, x):
        port.send(x)

    @endpoint
    @staticmethod
    def static(x):
        return x


def checks() -> dict:
    return signatures.of_endpoints(Echo, ["echo", "keyword", "ported", "static"], "m", EXPLICIT_PORT)


@pytest.mark.parametrize(("name", "args", "kwargs"), [
    ("echo", (1,), {}), ("echo", (1, 2, 3, 4), {"c": 5, "z": 6}), ("echo", (), {"a": 1}),
    ("keyword", (), {"k": 1}), ("ported", (1,), {}), ("ported", (), {"x": 1}),
])
def test_what_the_method_takes_passes(name, args, kwargs):
    checks()[name](args, kwargs)


@pytest.mark.parametrize(("name", "args", "kwargs", "words"), [
    ("echo", (), {}, "m.echo(): missing a required argument: 'a'"),
    ("echo", (1,), {"a": 2}, "m.echo(): multiple values for argument 'a'"),
    ("keyword", (), {}, "m.keyword(): missing a required argument: 'k'"),
    ("keyword", (1,), {"k": 1}, "m.keyword(): too many positional arguments"),
    ("ported", (1, 2), {}, "m.ported(): too many positional arguments"),
    ("ported", (), {"y": 1}, "m.ported(): missing a required argument: 'x'"),
])
def test_what_it_cannot_take_raises_type_error_naming_the_call(name, args, kwargs, words):
    with pytest.raises(TypeError) as caught:
        checks()[name](args, kwargs)
    assert str(caught.value) == words


def test_a_check_pickles_small_and_still_checks():
    check = pickle.loads(pickle.dumps(checks()["echo"]))
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        check((), {})
    assert b"unpicklable" not in pickle.dumps(checks()["echo"])


def test_what_cannot_be_read_is_not_checked():
    assert "static" not in checks()
    assert signatures.of(print, 1, "print") is None


def test_a_shape_that_bound_is_remembered_and_another_is_still_checked():
    check = signatures.of_endpoints(Echo, ["keyword"], "r", EXPLICIT_PORT)["keyword"]
    check((), {"k": 1})
    check((), {"k": 2})  # the same shape: no bind
    with pytest.raises(TypeError, match=r"r\.keyword\(\): missing a required argument: 'k'"):
        check((), {"j": 1})
    with pytest.raises(TypeError, match=r"r\.keyword\(\): "):
        check((1,), {"k": 1})
    assert check._shapes == {(0, ("k",))}


def test_a_pickled_check_holds_builtins_only_and_checks_alike():
    check = signatures.of_endpoints(Echo, ["echo"], "r", EXPLICIT_PORT)["echo"]
    data = pickle.dumps(check)
    assert b"inspect" not in data  # no Signature in the pickle: small, quick to load
    again = pickle.loads(data)
    again((1,), {"c": 2, "z": 3})
    with pytest.raises(TypeError, match=r"r\.echo\(\): missing a required argument: 'a'"):
        again((), {"c": 2})
