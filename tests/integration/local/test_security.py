"""The proc server on the network: nothing is unpickled before authentication, and no bad peer
can crash it or disturb others.

Aspects: a wrong token is refused with a reason; a pickle sent before authenticating is never
executed; garbage, truncated and oversized frames, and requests whose fields do not fit their op,
close only that connection; a peer that never reads its replies neither stalls the proc (its
I/O thread, other actors, new clients) nor makes it buffer them without bound, also while an
actor's reply to that peer is stuck and the peer sends more requests or garbage; the server
keeps serving its real clients throughout; IDENTIFY answers an authenticated client without pickles;
the token is not in the environment an actor, or a subprocess it starts, gets; actors that
ended (failed, or stopped with an event loop) leave no thread behind; a peer that stops reading
holds up no other caller of the actor it called (its replies wait in memory, up to a limit past
which its connection is closed).
"""

import os
import pickle
import select
import socket
import time

import pytest

from benchmarks import flooding
from mesh_client._src.runtime import channel, handshaking, identifying, ops, streams
from mesh_client._src.wire import envelopes, errors, frames, protocol, serialization
from tests.integration.local.actors import (
    AsyncExits,
    Blobs,
    FailingInit,
    Lambda,
    Recorder,
    token_seen,
)


@pytest.fixture(scope="module")
def target(procs):
    rec = procs.spawn("sec", Recorder).slice(hosts=0, gpus=0)
    address = procs._group.addresses[0]
    return rec, address


def _hello(address):
    sock = socket.create_connection(address, timeout=10)
    head = sock.recv(frames.HEADER.size + 8 + 32)
    assert head[:2] == frames.MAGIC
    return sock


def _read_all(sock):
    chunks = []
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


class _Exploit:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_wrong_token_is_refused_and_others_are_served(target):
    rec, address = target
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        channel.connect(address, b"not-the-token", on_message=lambda *a: None, on_closed=lambda *a: None)
    assert rec.echo.call_one("fine").get() == "fine"


def test_a_pickle_before_authentication_is_never_executed(target, tmp_path):
    rec, address = target
    marker = tmp_path / "pwned"
    payload = pickle.dumps((1, 1, _Exploit(marker)))
    sock = _hello(address)
    sock.sendall(frames.encode_bytes(frames.Kind.MESSAGE, [payload]))
    reply = _read_all(sock)
    sock.close()
    assert b"unexpected MESSAGE frame" in reply
    assert not marker.exists()
    assert rec.echo.call_one("after").get() == "after"


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00" * 64,
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.AUTH, 1, 0) + frames.LENGTH.pack(2**40),
        frames.encode_bytes(frames.Kind.AUTH, [b"short"]),
        frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.AUTH, 1, 0)[:5],  # truncated
    ],
)
def test_bad_frames_close_only_that_connection(target, junk):
    rec, address = target
    sock = _hello(address)
    sock.sendall(junk)
    sock.shutdown(socket.SHUT_WR)
    _read_all(sock)
    sock.close()
    assert rec.echo.call_one("alive").get() == "alive"


def test_oversized_frames_after_authentication_are_refused(procs):
    address = procs._group.addresses[1]
    closed = []
    ch = channel.connect(address, procs._group.token, on_message=lambda *a: None, on_closed=lambda c, r: closed.append(r))
    # Announce 20 GiB (above the 16 GiB default limit) without sending it.
    head = frames.HEADER.pack(frames.MAGIC, frames.VERSION, frames.Kind.MESSAGE, 1, 0) + frames.LENGTH.pack(20 * 1024**3)
    ch.stream.write([head])
    deadline = time.monotonic() + 10
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed and "exceeds the limit" in closed[0]
    rec = procs.spawn("after-big", Recorder).slice(hosts=0, gpus=1)
    assert rec.echo.call_one(1).get() == 1


def test_identify_answers_an_authenticated_client(procs):
    info = identifying.identify_proc(procs._group.addresses[3], procs._group.token)
    assert info["mesh"] == "t" and info["rank"] == 3 and info["coords"] == {"hosts": 1, "gpus": 1}
    with pytest.raises(errors.AuthenticationError):
        identifying.identify_proc(procs._group.addresses[3], b"bad")


@pytest.mark.parametrize(
    "fields",
    [(ops.CALL,), (ops.CALL, ["unhashable"]), (ops.SPAWN, "a"), (ops.WATCH,), (ops.STOP_ACTOR,), (ops.PORT_SEND, "p")],
    ids=["call-no-fields", "call-unhashable-id", "spawn-short", "watch-no-fields", "stop-actor-no-fields", "port-send-short"],
)
def test_requests_whose_fields_do_not_fit_close_only_that_connection(target, fields):
    rec, address = target
    closed = []
    ch = channel.connect(address, rec._group.token, on_message=lambda *a: None, on_closed=lambda c, r: closed.append(r))
    ch.send(envelopes.encode_request(7, fields, []))
    deadline = time.monotonic() + 30
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed and "do not fit" in closed[0], closed
    assert rec.echo.call_one("still").get(timeout=30) == "still"


MIB = 1 << 20


def _non_reader(address, token):
    """An authenticated raw connection with a small receive buffer, which never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(address)
    conn = protocol.Connection(protocol.Role.CLIENT, token)
    conn.start()
    handshaking.authenticate(streams.SocketStream(sock), conn, "test")
    return sock, conn


def _frame(conn, call_id, header, payload=()):
    return b"".join(bytes(p) for p in conn.send_message(envelopes.encode_request(call_id, header, payload)))


def _send_until_not_read(sock, data, most):
    """Send ``data`` repeatedly, at most ``most`` bytes, until the proc stops taking it."""
    sock.setblocking(False)
    sent = 0
    while sent < most:
        try:
            sent += sock.send(data)
        except BlockingIOError:
            if not select.select([], [sock], [], 2.0)[1]:
                break
    return sent


@pytest.mark.parametrize("then", ["identify-flood", "stuck-reply-then-identify", "stuck-reply-then-garbage"])
def test_a_peer_that_never_reads_stalls_nothing_else(procs, then):
    address = procs._group.addresses[0]
    pid = identifying.identify_proc(address, procs._group.token)["pid"]
    rec = procs.spawn(f"bystander-{then}", Recorder).slice(hosts=0, gpus=0)
    victim = procs.spawn(f"victim-{then}", Recorder).slice(hosts=0, gpus=0)
    rss_before = flooding.rss_bytes(pid)
    sock, conn = _non_reader(address, procs._group.token)
    try:
        if then != "identify-flood":  # the victim's write of 32 MiB to us stalls (its rest waits in memory)
            fields = (ops.CALL, victim._actor_id, "echo", 0, victim._shape.labels, victim._shape.sizes)
            sock.sendall(_frame(conn, 5, fields, serialization.dumps(((b"x" * (32 * MIB),), {}))))
            assert select.select([sock], [], [], 30)[0]  # its reply has begun: from here it blocks
        identify = _frame(conn, 6, (ops.IDENTIFY,))
        if then == "stuck-reply-then-garbage":
            sock.sendall(b"garbage, not a frame")
        else:  # replies the I/O thread makes itself, far more than any socket buffer holds
            _send_until_not_read(sock, identify * 1000, 64 * MIB)
        assert rec.echo.call_one("served").get(timeout=30) == "served"
        assert identifying.identify_proc(address, procs._group.token, timeout=30)["pid"] == pid
        # At most what a peer that stopped reading may leave unread (the stuck 32 MiB reply
        # waits in memory now), and that reply's bytes while they were copied there.
        assert flooding.rss_bytes(pid) - rss_before < channel.BACKLOG_LIMIT + 64 * MIB
    finally:
        sock.close()
    assert victim.echo.call_one("again").get(timeout=30) == "again"


def test_the_token_is_not_in_the_environment_of_actors_and_their_subprocesses(procs):
    lam = procs.spawn("envcheck", Lambda).slice(hosts=0, gpus=1)
    assert lam.run.call_one(token_seen).get(timeout=60) == (None, "")


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def test_ended_actors_leave_no_thread_behind(procs, faults):
    """A failed actor's thread (each kept one for good) and a stopped async actor's loop thread end."""
    one = procs.slice(hosts=1, gpus=1)
    pid = identifying.identify_proc(one._group.addresses[one._shape.ranks[0]], procs._group.token)["pid"]
    before = _threads(pid)
    for i in range(5):
        failing = one.spawn(f"threadfail-{i}", FailingInit)
        with pytest.raises(Exception, match="cannot build the model"):
            failing.ping.call_one().get(timeout=60)
        looping = one.spawn(f"threadloop-{i}", AsyncExits)
        assert looping.ping.call_one().get(timeout=60) == "pong"
        looping.stop().get(timeout=60)
    deadline = time.monotonic() + 30
    while _threads(pid) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _threads(pid) <= before
    assert len(faults.wait("threadfail", count=5)) == 5


def _ask_for_blobs(sock, conn, actor, count, size):
    fields = (ops.CALL, actor._actor_id, "blob", 0, actor._shape.labels, actor._shape.sizes)
    request = serialization.dumps(((size,), {}))
    sock.sendall(b"".join(_frame(conn, 100 + i, fields, request) for i in range(count)))  # small: all go at once


def test_a_peer_that_stops_reading_holds_up_no_other_caller_of_its_actor(procs):
    """The actor's write to it stops waiting after a second; the rest waits in memory (it
    waited for ever, and so did every other caller of that actor)."""
    shared = procs.spawn("shared", Blobs).slice(hosts=0, gpus=1)
    sock, conn = _non_reader(procs._group.addresses[shared._shape.ranks[0]], procs._group.token)
    try:
        _ask_for_blobs(sock, conn, shared, 8, 4 * MIB)  # 32 MiB of replies: more than any socket holds
        for _ in range(3):
            assert shared.ping.call_one().get(timeout=60) == "pong"
    finally:
        sock.close()


def test_a_peer_that_leaves_too_much_unread_is_cut_off(procs):
    shared = procs.spawn("flooded", Blobs).slice(hosts=0, gpus=1)
    address = procs._group.addresses[shared._shape.ranks[0]]
    pid = identifying.identify_proc(address, procs._group.token)["pid"]
    sock, conn = _non_reader(address, procs._group.token)
    try:
        _ask_for_blobs(sock, conn, shared, 24, 4 * MIB)  # 96 MiB, over the 64 MiB a peer may leave
        assert shared.ping.call_one().get(timeout=60) == "pong"
        received, deadline = 0, time.monotonic() + 60
        sock.settimeout(5)
        while time.monotonic() < deadline:  # the proc closed it: what was sent, then the end
            try:
                chunk = sock.recv(1 << 20)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            received += len(chunk)
        assert received < 24 * 4 * MIB, received
        assert flooding.rss_bytes(pid) < 512 * MIB
    finally:
        sock.close()
    assert shared.ping.call_one().get(timeout=60) == "pong"
