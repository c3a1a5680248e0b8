"""Out-of-band buffers end where the socket wrote them: no copy on the receiving side.

Aspects: a ``bytes``, a ``bytearray`` and a numpy array sent through a real connection object
come back as (views of) the very objects the frame was received into; a read-only array stays
read-only and a writable one writable; several buffers in one message; plain data with buffers
takes the standard pickler and still round-trips what cloudpickle would (functions inside fall
back to cloudpickle).
"""

import numpy as np

from mesh_client._src.wire import frames, serialization
from mesh_client._src.wire.protocol import NEED_DATA, Connection, Message, Role, State

MIB = 1 << 20


def through_the_wire(obj: object) -> tuple[object, list[bytes | bytearray | memoryview]]:
    """``obj`` pickled, framed, received in 64 KiB reads plus receive_buffer(), and unpickled."""
    wire = frames.encode_bytes(frames.Kind.MESSAGE, serialization.dumps(obj))
    conn = Connection(Role.SERVER, b"token")
    conn.state = State.AUTHENTICATED
    at = 0
    while True:
        view = conn.receive_buffer()
        if view is not None:
            n = min(view.nbytes, len(wire) - at)
            view[:n] = wire[at : at + n]
            conn.buffer_filled(n)
        else:
            n = min(65536, len(wire) - at)
            conn.receive_data(wire[at : at + n])
        at += n
        event = conn.next_event()
        if event is not NEED_DATA:
            assert isinstance(event, Message)
            return serialization.loads(event.segments), event.segments


def test_bytes_arrive_as_the_received_object():
    blob = bytes(range(256)) * 4096
    back, segments = through_the_wire(((blob,), {}))
    assert back == ((blob,), {})
    assert back[0][0] is segments[-1]  # the bytes object the socket filled, not a copy of it


def test_a_bytearray_arrives_as_the_received_object_and_is_writable():
    data = bytearray(range(256)) * 4096
    back, segments = through_the_wire([data, b"small"])
    assert back == [data, b"small"]
    assert back[0] is segments[-1] and type(back[0]) is bytearray
    back[0][0] = 99  # the caller's own memory now


def test_numpy_arrays_are_views_of_the_received_buffer():
    arr = np.arange(MIB // 4, dtype=np.float32).reshape(512, -1)
    back, segments = through_the_wire({"x": arr})
    x = back["x"]
    assert np.array_equal(x, arr) and x.dtype == arr.dtype and x.shape == arr.shape
    assert x.flags.writeable
    assert np.shares_memory(x, np.frombuffer(segments[-1], dtype=np.uint8))  # no copy
    frozen = arr.copy()
    frozen.flags.writeable = False
    assert not through_the_wire(frozen)[0].flags.writeable  # as pickle protocol 5 promises


def test_several_buffers_in_one_message():
    a, b = np.ones(200_000, dtype=np.int64), bytearray(b"q" * 300_000)
    c = bytes(b"r" * 100_000)
    back, segments = through_the_wire(((a, b, c, np.zeros(3)), {"tiny": np.arange(3)}))
    (ra, rb, rc, rz), kw = back
    assert np.array_equal(ra, a) and rb == b and rc == c and not rz.any() and list(kw["tiny"]) == [0, 1, 2]
    assert rb is segments[2] and rc is segments[3]


def test_plain_data_with_buffers_skips_cloudpickle_but_functions_still_travel():
    blob = b"x" * 100_000
    assert serialization._buffered(((blob, bytearray(blob), np.ones(4)), {"k": [1, "two"]})) == serialization._BUFFERS
    assert serialization._buffered(((blob, lambda: 3), {})) == serialization._NO

    def triple(v: int) -> int:
        return 3 * v

    back, _ = through_the_wire(((blob, triple), {}))
    assert back[0][0] == blob and back[0][1](2) == 6


def test_plain_cpu_tensors_are_views_of_the_received_buffer():
    import torch

    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        t = (torch.arange(MIB // 4) % 3).to(dtype).reshape(256, -1)
        back, segments = through_the_wire(((t,), {}))
        r = back[0][0]
        assert r.dtype == dtype and r.shape == t.shape and torch.equal(r, t)
        assert type(segments[-1]) is bytearray and len(segments[-1]) == t.numel() * t.element_size()
        assert r.data_ptr() == torch.frombuffer(segments[-1], dtype=torch.uint8).data_ptr()  # no copy
        r.zero_()  # writable, the receiver's own memory
        assert torch.equal(t, (torch.arange(MIB // 4) % 3).to(dtype).reshape(256, -1))


def test_other_tensors_keep_torchs_own_pickling():
    import torch

    base = torch.arange(MIB, dtype=torch.float32)
    grad = torch.ones(MIB // 4, requires_grad=True)
    view = base[1:]  # does not cover its storage: torch sends (and shares) the storage
    param = torch.nn.Parameter(torch.ones(MIB // 4))
    small = torch.ones(4)
    for t in (grad, view, param, small, base.reshape(1024, -1).t()):
        assert serialization.tensors.reduce(t) is None
    ((rg, rv, rp, rs), _), _ = through_the_wire(((grad, view, param, small), {}))
    assert rg.requires_grad and torch.equal(rv, view) and type(rp) is torch.nn.Parameter and torch.equal(rs, small)


def test_a_buffer_or_list_passed_twice_arrives_as_one_object():
    data, blob = bytearray(200_000), b"b" * 100_000
    shared = [data, 1]
    result = (data, blob, blob, shared, shared)  # an endpoint's result: lists are walked one level
    assert len(serialization.dumps(result)) == 3  # the stream, data once, blob once
    d1, b1, b2, s1, s2 = through_the_wire(result)[0]
    assert b1 is b2
    assert s1 is s2
    assert s1[0] is d1


def test_tensors_in_plain_data_take_the_standard_pickler_with_the_tensor_reducer():
    import torch

    t, grad = torch.ones(MIB // 4), torch.ones(10, requires_grad=True)
    args = ((t, b"y" * 100_000), {"g": grad, "n": 3})
    assert serialization._buffered(args) == serialization._TENSORS
    assert serialization._buffered(((torch.nn.Parameter(t),), {})) == serialization._NO  # cloudpickle's path
    ((rt, rb), rd), segments = through_the_wire(args)
    assert torch.equal(rt, t) and rt.data_ptr() == torch.frombuffer(segments[1], dtype=torch.uint8).data_ptr()
    assert rb == b"y" * 100_000 and rd["n"] == 3 and rd["g"].requires_grad and torch.equal(rd["g"], grad)


def test_arrays_numpys_own_reduce_keeps_round_trip_exactly():
    def scale(v: float) -> float:
        return 2 * v

    objects = np.array([scale, 1, "two"] * 30_000, dtype=object)  # elements need cloudpickle
    strided = np.arange(MIB // 2, dtype=np.int16).reshape(512, -1)[:, ::2]  # not contiguous
    swapped = np.arange(100_000, dtype=">f8")  # not the native byte order
    when = np.arange(100_000).astype("M8[s]")
    assert serialization._buffered(((objects,), {})) == serialization._NO
    ((o, s, w, t), _), _ = through_the_wire(((objects, strided, swapped, when), {}))
    assert o[0](2) == 4 and list(o[1:3]) == [1, "two"] and len(o) == 90_000
    assert np.array_equal(s, strided) and np.array_equal(w, swapped) and w.dtype == swapped.dtype
    assert np.array_equal(t, when) and t.dtype == when.dtype
