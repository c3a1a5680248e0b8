"""Serialization: large bytes and buffers travel out of band, objects survive the trip."""

import numpy as np

from mesh_client._src.wire import serialization


def test_small_objects_are_one_segment():
    segments = serialization.dumps({"a": [1, 2, 3]})
    assert len(segments) == 1
    assert serialization.loads(segments) == {"a": [1, 2, 3]}


def test_large_bytes_travel_out_of_band_without_a_copy():
    blob = b"z" * (1 << 20)
    segments = serialization.dumps(("echo", blob))
    assert len(segments) == 2
    assert segments[1].nbytes == len(blob)
    assert segments[1].obj is blob  # a view of the caller's object, not a copy
    assert len(segments[0]) < 1000
    assert serialization.loads([bytes(s) for s in segments]) == ("echo", blob)


def test_numpy_arrays_use_pickle5_buffers():
    arr = np.arange(100_000, dtype=np.float32)
    segments = serialization.dumps(arr)
    assert len(segments) == 2
    back = serialization.loads([bytearray(s) for s in segments])
    assert np.array_equal(back, arr)


def test_functions_defined_here_travel_by_value():
    def add(a, b):
        return a + b

    fn = serialization.loads([bytes(s) for s in serialization.dumps(add)])
    assert fn(2, 3) == 5
