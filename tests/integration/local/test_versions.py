"""Client and proc server of different wire protocol versions (:mod:`mesh_client._src.wire.versions`).

Aspects: spawning procs whose proc server is of an older release fails at the connection with
``VersionMismatch`` (exported by ``mesh_client`` and ``mesh_client.actor``), naming both versions and the image to use, not later with an unpickling error; a client
of an older release (which sends 0 and ignores the server's version) is refused by a current
proc server with a reason it prints, and the server goes on serving its own clients.
"""

import pathlib
import socket
import sys

import pytest

import mesh_client.actor
from mesh_client import this_host
from mesh_client._src.local.bootstrap import BootstrapCommand
from mesh_client._src.wire import auth, errors, frames, versions
from tests.integration.local.actors import Recorder

OLDER_SERVER = pathlib.Path(__file__).with_name("older_server.py")


def test_spawning_on_an_older_proc_server_names_both_versions_and_the_image_to_use():
    older = BootstrapCommand(program=sys.executable, args=(str(OLDER_SERVER),))
    try:
        this_host().spawn_procs(per_host={"gpus": 1}, name="older", bootstrap_command=older)
    except mesh_client.actor.VersionMismatch as exc:  # where users catch errors, as Monarch's module
        refused = exc
    else:
        pytest.fail("spawning on an older proc server did not raise")
    assert mesh_client.VersionMismatch is mesh_client.actor.VersionMismatch is errors.VersionMismatch
    message = str(refused)
    assert message.startswith("older[gpus=0]: ")  # which proc server
    assert "the proc server speaks no protocol version (a procmesh release from before protocol versions)" in message
    assert "this client (procmesh " in message and f"speaks protocol {versions.PROTOCOL_VERSION}" in message
    assert f"run the proc-server image built from this client's procmesh version (procmesh/proc-server:{versions.release()})" in message


def _frame(sock):
    """One handshake frame from ``sock``: (kind, header field, body)."""
    data = b""
    while len(data) < frames.HEADER.size + frames.LENGTH.size:
        chunk = sock.recv(4096)
        assert chunk, "the proc server closed without a frame"
        data += chunk
    kind, _ = frames.parse_header(data)
    (length,) = frames.LENGTH.unpack_from(data, frames.HEADER.size)
    head = frames.HEADER.size + frames.LENGTH.size
    while len(data) < head + length:
        data += sock.recv(4096)
    return kind, frames.header_field(data), data[head:head + length]


def test_an_older_client_is_refused_with_a_reason_and_others_are_served(procs):
    rec = procs.spawn("versions", Recorder).slice(hosts=0, gpus=0)
    address, token = procs._group.addresses[0], procs._group.token
    with socket.create_connection(address, timeout=10) as sock:  # the handshake of a release before versions
        kind, field, nonce = _frame(sock)
        assert (kind, field) == (frames.Kind.HELLO, versions.PROTOCOL_VERSION)
        mine = b"c" * auth.NONCE_BYTES
        sock.sendall(frames.encode_bytes(frames.Kind.AUTH, [mine + auth.client_mac(token, nonce, mine)]))
        kind, _, reason = _frame(sock)
    assert kind is frames.Kind.REJECT
    assert "procmesh wire protocol mismatch: the client speaks no protocol version" in reason.decode()
    assert "this proc server (procmesh " in reason.decode()
    assert "install in the client the procmesh version of the proc-server image" in reason.decode()
    assert rec.echo.call_one("still").get(timeout=60) == "still"
