"""The constant pickles of the commonest payloads: a call without arguments, a result of None.

Aspects: both round-trip and are fresh lists each time; look-alikes (arguments that are
present, an array where the empty tuple would be, a non-empty kwargs) take the general path.
"""

import numpy as np

from mesh_client._src.wire import serialization


def test_no_arguments_and_none_round_trip_as_fresh_lists():
    for value in (((), {}), None):
        first, second = serialization.dumps(value), serialization.dumps(value)
        assert first is not second
        assert serialization.loads(first) == value


def test_look_alikes_take_the_general_path():
    for value in (((1,), {}), ((), {"k": 1}), ([], {}), ((), []), ((), {}, None)):
        assert serialization.loads(serialization.dumps(value)) == value
    args, kwargs = serialization.loads(serialization.dumps((np.arange(3), {})))
    assert args.tolist() == [0, 1, 2] and kwargs == {}
