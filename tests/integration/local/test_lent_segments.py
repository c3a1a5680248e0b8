"""Large ``bytes`` lent over AF_UNIX links (wire/pulled.py, runtime/peermemory.py), real procs.

Aspects: a local mesh's links lend both ways once each end read the other's probe, and a 1 MiB
``bytes`` echo is intact; what was lent is let go once read (nothing stays held on either end);
a lent argument nobody else refers to stays alive until the proc has read it; many large calls
in flight at once stay each its own; bytearrays and arrays still go through the socket; with
reads turned off in the controller nothing is lent either way and calls work as before; a proc
killed with large calls pending fails them at once; a peer that lends without being asked to
is refused, and the proc goes on.
"""

import os
import signal
import socket

import numpy as np
import pytest

from mesh_client import Actor, endpoint, this_host
from mesh_client._src.runtime import channel, handshaking, peermemory, streams, unixlinks
from mesh_client._src.wire import packing, protocol, pulled, serialization
from tests.integration.local.single_proc import wait_until

MIB = 1 << 20


class Lender(Actor):
    @endpoint
    def echo(self, value: object) -> object:
        return value

    @endpoint
    def sleep_then_echo(self, value: object) -> object:
        import time

        time.sleep(60)
        return value

    @endpoint
    def links(self) -> list[tuple[bool, bool, int]]:
        """Each unix channel of this proc: (it lends, it reads lent segments, bytes lent now)."""
        import gc

        return [(c._lending, c.conn._pull is not None, c.lent_bytes) for c in gc.get_objects()
                if type(c) is channel.Channel and c._sock is not None and c._sock.family == socket.AF_UNIX
                and c.state is channel.ChannelState.ACTIVE]

    @endpoint
    def pid(self) -> int:
        return os.getpid()


def controller_links(mesh) -> list[channel.Channel]:
    return [peer._channel for peer in mesh._group.peers]


def payload(seed: int, n: int = MIB) -> bytes:
    return np.random.default_rng(seed).integers(0, 255, n, dtype=np.uint8).tobytes()


@pytest.fixture(scope="module")
def procs():
    with this_host().spawn_procs(per_host={"gpus": 2}, name="lent") as mesh:
        yield mesh


@pytest.fixture(scope="module")
def lenders(procs):
    return procs.spawn("lender", Lender)


def test_a_local_meshs_links_lend_both_ways_and_a_1mib_echo_is_intact(procs, lenders):
    blob = payload(1)
    assert list(lenders.echo.call(blob).get().values()) == [blob, blob]
    for link in controller_links(procs):
        assert link._lending and link.conn._pull is not None
    for links in lenders.links.call().get().values():
        assert (True, True) in [(lends, reads) for lends, reads, _ in links]  # its link to us


def test_what_was_lent_is_let_go_on_both_ends(procs, lenders):
    one = lenders.slice(gpus=0)
    for i in range(5):
        assert one.echo.call_one(payload(10 + i)).get() == payload(10 + i)
    wait_until(lambda: all(link.lent_bytes == 0 for link in controller_links(procs)), "the controller's loans released")
    wait_until(lambda: all(n == 0 for _, _, n in one.links.call_one().get()), "the proc's loans released")


def test_a_lent_argument_nobody_else_holds_stays_alive_until_read(lenders):
    one = lenders.slice(gpus=1)
    futures = [one.echo.call_one(payload(100 + i)) for i in range(8)]  # each argument's only reference is the loan
    assert [f.get(timeout=60) for f in futures] == [payload(100 + i) for i in range(8)]


def test_many_large_calls_in_flight_stay_apart_beside_socket_ones(lenders):
    one = lenders.slice(gpus=0)
    blobs = [payload(200 + i, MIB + 4096 * i) for i in range(16)]
    arrays = [np.full(300_000, i, dtype=np.int32) for i in range(4)]
    futures = [one.echo.call_one(b) for b in blobs] + [one.echo.call_one(a) for a in arrays]
    results = [f.get(timeout=60) for f in futures]
    assert results[:16] == blobs
    assert all(np.array_equal(r, a) for r, a in zip(results[16:], arrays))
    back = one.echo.call_one(bytearray(blobs[0])).get()
    assert type(back) is bytearray and back == blobs[0]


def test_with_reads_off_in_the_controller_nothing_is_lent(monkeypatch):
    monkeypatch.setenv(peermemory.ENV, "0")
    with this_host().spawn_procs(per_host={"gpus": 1}, name="unlent") as mesh:
        actor = mesh.spawn("lender", Lender)
        blob = payload(300)
        assert actor.echo.call_one(blob).get() == blob
        (link,) = controller_links(mesh)
        assert not link._lending and link.conn._pull is None
        assert [(lends, reads) for lends, reads, _ in actor.links.call_one().get()] == [(False, False)]


def test_a_killed_proc_fails_its_large_calls_at_once():
    with this_host().spawn_procs(per_host={"gpus": 1}, name="lent_killed") as mesh:
        actor = mesh.spawn("lender", Lender)
        pid = actor.pid.call_one().get()
        pending = [actor.sleep_then_echo.call_one(payload(400 + i)) for i in range(3)]
        os.kill(pid, signal.SIGKILL)
        for future in pending:
            with pytest.raises(Exception) as failed:
                future.get(timeout=30)
            assert not isinstance(failed.value, TimeoutError)


def test_a_peer_that_lends_unasked_is_refused_and_the_proc_goes_on(procs, lenders):
    address, token = procs._group.addresses[0], procs._group.token
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(unixlinks.path_for(address))
    stream = streams.SocketStream(sock)
    conn = protocol.Connection(protocol.Role.CLIENT, token)
    conn.start()
    try:
        handshaking.authenticate(stream, conn, "test")
        blob = payload(500)
        frame = packing.request_frame(1, 1, b"fields", serialization.dumps(blob))
        lent, _ = pulled.lend(frame, peermemory.address_of)  # lent, though the proc never read our probe
        stream.write(lent)
        closed = None
        while closed is None:
            data = stream.read(65536)
            conn.receive_data(data)
            while (event := conn.next_event()) is not protocol.NEED_DATA:
                if isinstance(event, protocol.Closed):
                    closed = event
                    break
                assert isinstance(event, protocol.Offered)  # the proc offers its memory, as to any unix peer
        assert closed.reason is not None and "never accepted" in closed.reason
    finally:
        stream.close()
    assert lenders.slice(gpus=0).echo.call_one(b"still here").get() == b"still here"
