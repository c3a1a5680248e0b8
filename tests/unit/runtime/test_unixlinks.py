"""The unix-link helpers (runtime/unixlinks.py, local/rundirs.py) on real sockets and directories.

Aspects: the path is derived from the TCP address and refused past sun_path's limit; only a
private directory of this user is used; a listener replaces a stale socket file and makes its
own 0600; the opener takes the unix socket when one listens, TCP when the file is missing or
stale; removing a proc's file spares a newer file at its path; the sweep removes only directories
of controllers that are gone.
"""

import os
import socket
import stat
import subprocess
import sys

import pytest

from mesh_client._src.local import rundirs
from mesh_client._src.runtime import unixlinks


@pytest.fixture
def private(tmp_path, monkeypatch):
    directory = tmp_path / "links"
    directory.mkdir(mode=0o700)
    monkeypatch.setattr(unixlinks, "_directory", None)  # restored after the test
    assert unixlinks.use_directory(str(directory))
    return str(directory)


@pytest.fixture
def tcp_server():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield listener
    listener.close()


def test_the_path_names_host_and_port_and_respects_sun_path(private):
    assert unixlinks.path_for(("127.0.0.1", 4242)) == os.path.join(private, "127.0.0.1_4242")
    assert unixlinks.path_for(("127.0.0.1", 4242), "/" + "d" * 120) is None


def test_only_a_private_directory_of_this_user_is_used(tmp_path, monkeypatch):
    monkeypatch.setattr(unixlinks, "_directory", None)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    assert not unixlinks.use_directory(str(open_dir)) and unixlinks.directory() is None
    link = tmp_path / "link"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link.symlink_to(private)
    assert not unixlinks.use_directory(str(link))  # a symlink could be swapped under us
    assert not unixlinks.use_directory(str(tmp_path / "missing"))
    assert unixlinks.use_directory(str(private)) and unixlinks.directory() == str(private)


def test_a_listener_replaces_a_stale_file_and_is_the_users(private, tcp_server):
    address = tcp_server.getsockname()
    path = unixlinks.path_for(address)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # bound, then closed without unlink: what a killed proc leaves
    stale.close()
    listener = unixlinks.listen(address)
    assert listener is not None
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        stream = unixlinks.open_stream(address, 5)
        assert unixlinks.family(stream) == socket.AF_UNIX
        peer, _ = listener.accept()
        stream.write([b"ping"])
        assert peer.recv(4) == b"ping"
        peer.close()
        stream.close()
    finally:
        listener.close()
        unixlinks.remove(address)
    assert not os.path.exists(path)


def test_the_opener_takes_tcp_when_the_file_is_missing_or_stale(private, tcp_server):
    address = tcp_server.getsockname()
    missing = unixlinks.open_stream(address, 5)
    assert unixlinks.family(missing) == socket.AF_INET
    missing.close()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(unixlinks.path_for(address))
    stale.close()
    refused = unixlinks.open_stream(address, 5)
    assert unixlinks.family(refused) == socket.AF_INET
    refused.close()


def test_a_tombstone_names_its_mesh_only(private, tcp_server):
    """A killed proc's socket, buried: its mesh's clients must not dial the port (a squatter
    there would relay their handshake to a live proc of the mesh); another mesh's, or a worker
    someone starts at the port later, may."""
    address = tcp_server.getsockname()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(unixlinks.path_for(address))  # what a killed proc leaves
    stale.close()
    assert not unixlinks.buried_for(address, b"mesh-token")
    unixlinks.bury_stale(address, b"mesh-token")  # the launcher, once it saw the proc end
    assert stat.S_ISREG(os.lstat(unixlinks.path_for(address)).st_mode)
    assert unixlinks.buried_for(address, b"mesh-token")
    assert not unixlinks.buried_for(address, b"another-token")
    assert b"mesh-token" not in open(unixlinks.path_for(address), "rb").read()  # a hash, not the token
    other = unixlinks.open_stream(address, 5)  # another mesh's client: TCP, as before
    assert unixlinks.family(other) == socket.AF_INET
    other.close()


def test_without_a_directory_every_link_is_tcp(tcp_server, monkeypatch):
    monkeypatch.setattr(unixlinks, "_directory", None)
    assert unixlinks.path_for(tcp_server.getsockname()) is None
    assert unixlinks.listen(tcp_server.getsockname()) is None
    stream = unixlinks.open_stream(tcp_server.getsockname(), 5)
    assert unixlinks.family(stream) == socket.AF_INET
    stream.close()


def test_the_sweep_removes_only_directories_of_gone_controllers(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    namespace = rundirs._namespace()
    dead = tmp_path / f"pmunix-{namespace}-{gone.pid}-abc"
    alive = tmp_path / f"pmunix-{namespace}-{os.getpid()}-abc"
    other_namespace = tmp_path / f"pmunix-{namespace + 1}-{gone.pid}-abc"
    not_ours = tmp_path / f"pm-bench-{gone.pid}"
    for path in (dead, alive, other_namespace, not_ours):
        path.mkdir(mode=0o700)
    (dead / "127.0.0.1_1234").write_text("")
    assert rundirs.sweep(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and alive.exists() and other_namespace.exists() and not_ours.exists()


def test_burying_a_killed_procs_file_spares_a_newer_one_at_the_same_path(private, tcp_server):
    address = tcp_server.getsockname()
    unixlinks.listen(address).close()  # the proc was killed: its file stays, nobody listens
    unixlinks.bury_stale(address, b"t")  # the launcher cleaning up after it
    assert not stat.S_ISSOCK(os.lstat(unixlinks.path_for(address)).st_mode)
    newer = unixlinks.listen(address)  # a new proc took the port, and the path with it
    try:
        unixlinks.bury_stale(address, b"t")
        assert stat.S_ISSOCK(os.lstat(unixlinks.path_for(address)).st_mode)
        stream = unixlinks.open_stream(address, 5)
        assert unixlinks.family(stream) == socket.AF_UNIX
        stream.close()
    finally:
        newer.close()
