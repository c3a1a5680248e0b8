"""A client facing an endpoint that is not a proc server it can trust (a squatted address, a
hostile or broken service): its handshake is bounded as a whole, not read by read.

Aspects: an endpoint that trickles its HELLO, one byte at a time and each just within the
timeout of a read, is given up on within the client's timeout, before the endpoint gets to
the end of that frame, by a direct connection and by IDENTIFY (a relink's probe), with a
TimeoutError naming the address and the handshake. A local proc that died is probed over its
unix socket only, never at its TCP port, which another user of the host may have bound by then
(to relay the probe's handshake to a live proc of the mesh). The reason in an endpoint's
REJECT reaches the client's exception with its control characters escaped (no forged lines or
terminal escapes).
"""

import contextlib
import os
import signal
import socket
import threading
import time

import pytest

from mesh_client import SupervisionError, this_host
from mesh_client._src.runtime import channel, identifying
from mesh_client._src.wire import errors, frames, versions
from tests.integration.local.actors import Lambda

TIMEOUT = 1.0
TRICKLE = 0.2  # between bytes: well within a read's timeout, so only a bound on the whole ends it


class Trickler:
    """Listens on loopback; sends its one client a valid HELLO, one byte per TRICKLE seconds."""

    def __init__(self) -> None:
        self.hello = frames.encode_bytes(frames.Kind.HELLO, [b"n" * 32], versions.PROTOCOL_VERSION)
        self.sent = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                for byte in self.hello:
                    conn.sendall(bytes([byte]))
                    self.sent += 1
                    time.sleep(TRICKLE)
            except OSError:  # the client gave up
                pass

    def close(self) -> None:
        self.listener.close()
        self._thread.join(len(self.hello) * TRICKLE + 5)


def _connect(address):
    return channel.connect(address, b"token", on_message=lambda *a: None, on_closed=lambda *a: None, timeout=TIMEOUT)


def _identify(address):
    return identifying.identify_proc(address, b"token", timeout=TIMEOUT)


@pytest.mark.parametrize("client", [_connect, _identify], ids=["connect", "identify"])
def test_a_trickled_handshake_is_given_up_within_the_timeout(client):
    trickler = Trickler()
    try:
        with pytest.raises(TimeoutError, match=rf"handshake with 127\.0\.0\.1:{trickler.address[1]} did not finish within 1 s"):
            client(trickler.address)
        # Given up while the endpoint was still in its first frame, not after the whole of it.
        assert 0 < trickler.sent < len(trickler.hello)
    finally:
        trickler.close()


def _close_tcp_listener(port):
    """In the proc: close its TCP listener (only), freeing ``port`` while it lives on."""
    import os
    import socket

    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:  # not a socket
            continue
        try:
            listening = (sock.family == socket.AF_INET and sock.getsockname()[1] == port
                         and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
        finally:
            sock.close()
        if listening:
            os.close(int(name))
            return os.getpid()
    raise LookupError(f"no TCP listener on port {port}")


@contextlib.contextmanager
def _squatted(lam, port):
    """The proc of ``lam`` frees ``port``, someone else takes it (as another user of the host
    could once the proc died), the proc is killed and its death seen; on leaving, nobody has
    dialled the squatter."""
    pid = lam.run.call_one(lambda: _close_tcp_listener(port)).get(timeout=60)
    squatter = socket.create_server(("127.0.0.1", port))
    try:
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError):
            lam.run.call_one(lambda: 1).get(timeout=60)
        yield
        squatter.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody dialed the port
            squatter.accept()
    finally:
        squatter.close()


def test_a_dead_local_procs_tcp_port_is_not_probed(faults):
    with this_host().spawn_procs(per_host={"procs": 1}, name="squatted") as mesh:
        lam = mesh.spawn("lam", Lambda).slice(procs=0)
        lam.run.call_one(lambda: 1).get(timeout=60)
        assert mesh._group.peers[0]._unix_link  # the link the probe follows is the unix socket's
        with _squatted(lam, mesh._group.addresses[0][1]):
            assert mesh._group.peers[0].relinked() is None  # the probe's verdict is in: gone
    assert faults.wait("lam")[0].crashed_ranks == [0]


def _call_other(ref):
    """In a proc: call ``ref``, saying how it ended."""
    try:
        return ["answered", ref.run.call_one(lambda: 1).get(timeout=30)]
    except Exception as exc:  # noqa: BLE001 - the outcome is the answer
        return ["failed", str(exc)]


def test_a_siblings_first_call_to_a_dead_local_proc_does_not_dial_its_port(faults):
    """Not only the relink probe: any first connection to a dead local proc (a sibling proc's,
    or a pickled mesh's) found its socket file refusing and dialled the TCP port instead."""
    with this_host().spawn_procs(per_host={"procs": 2}, name="sibling") as mesh:
        lam = mesh.spawn("lam", Lambda)
        dead, sibling = lam.slice(procs=0), lam.slice(procs=1)
        with _squatted(dead, mesh._group.addresses[0][1]):
            outcome = sibling.run.call_one(lambda: _call_other(dead)).get(timeout=120)
            assert outcome[0] == "failed" and "is not dialled" in outcome[1], outcome
    assert faults.wait("lam")[0].crashed_ranks == [0]


def test_an_endpoints_reject_reason_cannot_forge_lines_or_escapes():
    listener = socket.create_server(("127.0.0.1", 0))
    reason = "no\n\x1b[2K\rprocmesh: all procs healthy \u202e"

    def reject() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(frames.encode_bytes(frames.Kind.REJECT, [reason.encode()], versions.PROTOCOL_VERSION))

    thread = threading.Thread(target=reject, daemon=True)
    thread.start()
    try:
        with pytest.raises(errors.AuthenticationError) as refused:
            _identify(listener.getsockname()[:2])
    finally:
        thread.join(10)
        listener.close()
    text = str(refused.value)
    assert all(ch.isprintable() for ch in text), repr(text)
    assert r"refused the connection: no\n\x1b[2K\rprocmesh: all procs healthy \u202e" in text
