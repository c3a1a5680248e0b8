"""Large arguments and results between real processes, over real sockets.

Aspects: 1 MiB ``bytes``, ``bytearray`` and numpy arrays arrive in the actor as their own type
(a bytearray writable, a numpy array writable and backed by the received buffer, with no copy
made in the actor), and come back intact; several large buffers in one call; one actor's large
results to several callers' calls in flight at once stay each its own; a large frame whose
sender stops halfway does not hold up the proc's other connections (a read that waited for the
rest would), and completes when the rest comes; a call over the proc's message limit is refused
in the caller, and the connection and its other calls live on.
"""

import socket

import numpy as np
import pytest

from mesh_client import Actor, default_bootstrap_cmd, endpoint, this_host
from mesh_client._src.runtime import handshaking, ops, streams
from mesh_client._src.wire import envelopes, frames, protocol
from mesh_client._src.wire.errors import MessageTooLarge

MIB = 1 << 20


class Inspector(Actor):
    @endpoint
    def echo(self, value: object) -> object:
        return value

    @endpoint
    def describe(self, value: object) -> dict[str, object]:
        """What arrived: its type, whether it is writable, and what memory backs it."""
        out: dict[str, object] = {"type": type(value).__name__}
        if isinstance(value, np.ndarray):
            base = value
            while isinstance(base, np.ndarray) and base.base is not None:
                base = base.base
            if isinstance(base, memoryview):  # numpy.frombuffer keeps a view of the exporter
                base = base.obj
            out.update(writable=bool(value.flags.writeable), owns=bool(value.flags.owndata), base=type(base).__name__)
        if isinstance(value, bytearray):
            value[0] ^= 0xFF  # writable: the actor's own memory
            out["writable"] = True
        return out

    @endpoint
    def bump(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for a in arrays.values():
            a += 1  # in place: the received buffers are writable
        return arrays


@pytest.fixture(scope="module")
def procs():
    with this_host().spawn_procs(per_host={"gpus": 1}, name="large") as mesh:
        yield mesh


@pytest.fixture(scope="module")
def one(procs):
    return procs.spawn("inspector", Inspector)


def test_bytes_bytearray_and_numpy_echo_intact(one):
    data = np.random.default_rng(0).integers(0, 255, MIB, dtype=np.uint8)
    blob = data.tobytes()
    assert one.echo.call_one(blob).get() == blob
    back = one.echo.call_one(bytearray(blob)).get()
    assert type(back) is bytearray and back == blob
    arr = one.echo.call_one(data.reshape(1024, 1024)).get()
    assert arr.shape == (1024, 1024) and np.array_equal(arr.ravel(), data)


def test_what_arrives_in_the_actor_is_the_received_buffer(one):
    blob = bytes(range(256)) * 4096
    assert one.describe.call_one(blob).get() == {"type": "bytes"}
    assert one.describe.call_one(bytearray(blob)).get() == {"type": "bytearray", "writable": True}
    got = one.describe.call_one(np.ones((512, 512), dtype=np.float32)).get()
    # A writable view of the bytearray the socket filled: not an array that owns a copy.
    assert got == {"type": "ndarray", "writable": True, "owns": False, "base": "bytearray"}


def test_several_large_buffers_in_one_call_are_each_their_own(one):
    arrays = {name: np.full(200_000 + i, i, dtype=np.int32) for i, name in enumerate("abc")}
    back = one.bump.call_one(arrays).get()
    for i, name in enumerate("abc"):
        assert back[name].shape == (200_000 + i,) and (back[name] == i + 1).all()
        assert (arrays[name] == i).all()  # the caller's arrays are untouched


def test_large_results_of_calls_in_flight_stay_apart(one):
    blobs = [bytes([i]) * (MIB + i) for i in range(6)]
    futures = [one.echo.call_one(b) for b in blobs]
    results = [f.get() for f in futures]
    assert results == blobs


def test_a_cpu_tensor_echo_is_intact_and_writable(one):
    import torch

    t = torch.randn(512, 512)
    back = one.echo.call_one(t).get()
    assert back.dtype == torch.float32 and torch.equal(back, t)
    back.mul_(2)  # the caller's own memory
    assert not torch.equal(back, t)


def test_a_large_frame_stopped_halfway_holds_up_no_other_connection(procs, one):
    """Half of a 1 MiB IDENTIFY frame, then a call over the mesh's own link, then the rest: the
    call is answered while the frame waits, and the frame is answered once it is whole."""
    address, token = procs._group.addresses[0], procs._group.token
    stream = streams.SocketStream(socket.create_connection(address, timeout=60))
    conn = protocol.Connection(protocol.Role.CLIENT, token)
    conn.start()
    try:
        handshaking.authenticate(stream, conn, "test")
        frame = b"".join(bytes(p) for p in frames.encode(
            frames.Kind.MESSAGE, envelopes.encode_request(7, (ops.IDENTIFY,), (b"x" * MIB,))))
        half = len(frame) // 2
        stream.sock.sendall(frame[:half])
        for _ in range(3):  # each call waits for a reactor that is not stuck in the half frame
            assert one.echo.call_one("meanwhile").get(timeout=60) == "meanwhile"
        stream.sock.sendall(frame[half:])
        while (event := conn.next_event()) is protocol.NEED_DATA:
            conn.receive_data(stream.read(65536))
        assert isinstance(event, protocol.Message)
        assert envelopes.reply_head(event.segments) == (7, envelopes.OK)
    finally:
        stream.close()


def test_a_call_over_the_procs_limit_is_refused_in_the_caller_and_the_link_lives_on():
    # The proc would close the connection on such a frame (and every other call on it would
    # fail, the actor reported dead, for a cause only the proc's log told): the caller refuses
    # it, naming the size, the limit and the setting, and nothing else is disturbed.
    cmd = default_bootstrap_cmd().with_env({"PROCMESH_MAX_MESSAGE_BYTES": str(MIB)})
    with this_host().spawn_procs(per_host={"gpus": 1}, name="limited", bootstrap_command=cmd) as mesh:
        actor = mesh.spawn("inspector", Inspector)
        assert actor.echo.call_one(b"small").get(timeout=60) == b"small"
        pending = actor.echo.call_one(b"x" * (MIB // 2))
        with pytest.raises(MessageTooLarge, match=r"message is [\d,]+ bytes; proc limited\[gpus=0\] accepts at most 1,048,576 \(PROCMESH_MAX_MESSAGE_BYTES"):
            actor.echo.call_one(b"x" * (2 * MIB))
        with pytest.raises(ValueError, match="accepts at most"):  # numpy's buffers count too
            actor.echo.call_one(np.zeros(2 * MIB, dtype=np.uint8))
        assert pending.get(timeout=60) == b"x" * (MIB // 2)
        assert actor.echo.call_one(b"after").get(timeout=60) == b"after"
