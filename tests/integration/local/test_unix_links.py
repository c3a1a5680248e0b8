"""Local procs reached over AF_UNIX (runtime/unixlinks.py, local/rundirs.py), on real procs.

Aspects: a local mesh's calls, a proc's calls to another local proc, and a proc's calls to procs
it started itself (in the same directory) go over AF_UNIX; a
client falls back to TCP when the socket file is missing or stale (but a client of the mesh
never to an ended proc's buried address); a wrong token over the unix
socket is refused and garbage there is refused as on TCP; the unix listener shares the TCP
listener's budget of unauthenticated connections; the directory is 0700 and the sockets 0600;
a proc killed while calls are pending over AF_UNIX fails them at once; the socket files become
tombstones when the mesh stops (a killed proc's too) and the directory when the controller exits; a directory
left by a killed controller is removed by the next one; the controller's own proc server (where
procs send port values) listens on unix too.
"""

import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap

import pytest

from mesh_client import SupervisionError, this_host, this_proc
from mesh_client._src.runtime import channel, streams, unixlinks
from mesh_client._src.wire import errors, frames
from tests.integration.local.actors import Recorder
from tests.integration.local.single_proc import single_proc, wait_until
from tests.integration.local.unix_actors import LinkReporter

HELLO_BYTES = 48  # header, one length, a 32-byte nonce


def _family(peer):
    return unixlinks.family(peer._channel.stream)


def _unix_only(address, timeout):
    """An opener that insists on the unix socket (a test must not pass over TCP by accident)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(unixlinks.path_for(address))
    return streams.SocketStream(sock)


def _connect(address, token, opener):
    return channel.connect(address, token, on_message=lambda *a: None, on_closed=lambda *a: None, opener=opener)


def test_a_local_meshs_calls_go_over_unix_sockets(procs):
    recorders = procs.spawn("unix_rec", Recorder)
    assert list(recorders.echo.call("x").get().values()) == ["x"] * 4
    group = procs._group
    assert [_family(peer) for peer in group.peers] == [socket.AF_UNIX] * 4
    for address in group.addresses:
        assert os.path.exists(unixlinks.path_for(address))  # beside the TCP address clients name


def test_a_proc_reaches_another_local_proc_over_unix(procs):
    with this_host().spawn_procs(per_host={"procs": 2}, name="unix_other") as other:
        recorders = other.spawn("unix_target", Recorder)
        reporter = procs.spawn("unix_reporter", LinkReporter).slice(hosts=0, gpus=1)
        assert reporter.unix_directory.call_one().get() == unixlinks.directory()
        assert reporter.families.call_one(recorders).get() == ["AF_UNIX", "AF_UNIX"]


def test_procs_started_by_a_proc_share_the_directory_and_are_reached_over_unix(procs):
    reporter = procs.spawn("unix_nester", LinkReporter).slice(hosts=1, gpus=0)
    seen = reporter.nested_links.call_one().get(timeout=120)
    assert seen["families"] == ["AF_UNIX"] and seen["directory"] == unixlinks.directory()
    assert os.path.dirname(seen["path"]) == unixlinks.directory()
    assert stat.S_ISREG(os.lstat(seen["path"]).st_mode)  # stopped: buried
    assert seen["inner_pid"] != os.getpid()


def test_tcp_when_the_socket_file_is_missing_or_stale(procs):
    address, token = procs._group.addresses[0], procs._group.token
    path = unixlinks.path_for(address)
    over_unix = _connect(address, token, unixlinks.open_stream)
    assert unixlinks.family(over_unix.stream) == socket.AF_UNIX
    over_unix.close("test")
    moved = path + ".moved"
    os.rename(path, moved)  # the proc's listener stays; the path no longer leads to it
    try:
        missing = _connect(address, token, unixlinks.open_stream)
        assert unixlinks.family(missing.stream) == socket.AF_INET
        missing.close("test")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what a killed proc leaves behind
        stale.bind(path)
        stale.close()
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        refused = _connect(address, token, unixlinks.open_stream)
        assert unixlinks.family(refused.stream) == socket.AF_INET
        refused.close("test")
    finally:
        os.replace(moved, path)
    assert unixlinks.family(_connect(address, token, unixlinks.open_stream).stream) == socket.AF_UNIX


def test_a_wrong_token_and_garbage_over_unix_are_refused(procs):
    rec = procs.spawn("unix_sec", Recorder).slice(hosts=0, gpus=0)
    address = procs._group.addresses[0]
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        _connect(address, b"not-the-token", _unix_only)
    with _unix_only(address, 10).sock as raw:
        assert raw.recv(frames.HEADER.size + 8 + 32)[:2] == frames.MAGIC  # the same HELLO as on TCP
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n")
        raw.settimeout(10)
        try:
            assert raw.recv(65536)[:2] in (frames.MAGIC, b"")  # an ERROR frame or the close
        except ConnectionResetError:
            pass
    assert rec.echo.call_one("still served").get() == "still served"


def test_the_unix_listener_shares_the_budget_of_unauthenticated_connections(tmp_path):
    with single_proc(tmp_path, env={"PROCMESH_MAX_UNAUTHENTICATED": "2"}) as proc:
        address = proc.mesh._group.addresses[0]
        held = [_unix_only(address, 10).sock, socket.create_connection(address, timeout=10)]
        try:
            for sock in held:
                assert len(sock.recv(1024)) == HELLO_BYTES  # admitted: the server said HELLO
            # A TCP newcomer makes room: the oldest, the unix one, is closed.
            with socket.create_connection(address, timeout=10) as newcomer:
                assert len(newcomer.recv(1024)) == HELLO_BYTES
                held[0].settimeout(30)
                try:
                    while held[0].recv(1024):
                        pass
                except ConnectionResetError:
                    pass
            assert proc.actor.echo.call_one("served").get(timeout=30) == "served"
        finally:
            for sock in held:
                sock.close()
        evicted = f"procmesh: refused connection from local pid {os.getpid()} (unix socket): evicted to admit a newer connection"
        wait_until(lambda: any(line.startswith(evicted) for line in proc.log_lines()),
                   "the eviction of the unix connection, naming this process")


def test_the_directory_is_private_and_the_sockets_are_the_users(procs):
    directory = unixlinks.directory()
    st = os.lstat(directory)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    for address in procs._group.addresses:
        st = os.lstat(unixlinks.path_for(address))
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert len(os.fsencode(unixlinks.path_for(procs._group.addresses[0]))) <= unixlinks.MAX_PATH_BYTES


def test_a_killed_proc_fails_pending_unix_calls_at_once(faults):
    with this_host().spawn_procs(per_host={"procs": 2}, name="unix_victim") as mesh:
        recorders = mesh.spawn("unix_sleeper", Recorder)
        victim = recorders.slice(procs=1)
        pid = victim.where.call_one().get()["pid"]
        assert _family(mesh._group.peers[1]) == socket.AF_UNIX
        pending = victim.sleep.call_one(600)  # would hold the call for ten minutes
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError, match="killed by SIGKILL"):
            pending.get(timeout=60)
        faults.wait("unix_sleeper")


def test_socket_files_are_buried_when_the_mesh_stops_even_of_a_killed_proc(faults):
    """Each becomes a tombstone (a regular file naming the mesh): its clients never dial the
    address over TCP again, until the directory goes with its controller."""
    with this_host().spawn_procs(per_host={"procs": 2}, name="unix_stop") as mesh:
        recorders = mesh.spawn("unix_stopped", Recorder)
        paths = [unixlinks.path_for(a) for a in mesh._group.addresses]
        assert all(stat.S_ISSOCK(os.lstat(p).st_mode) for p in paths)
        os.kill(recorders.slice(procs=1).where.call_one().get()["pid"], signal.SIGKILL)
        faults.wait("unix_stopped")
        # A killed proc cannot bury its own: the controller does, once it has seen it end.
        assert unixlinks.buried_for(mesh._group.addresses[1], mesh._group.token)
        assert stat.S_ISSOCK(os.lstat(paths[0]).st_mode)  # the live one is reached as before
    assert all(stat.S_ISREG(os.lstat(p).st_mode) for p in paths)
    assert all(unixlinks.buried_for(a, mesh._group.token) for a in mesh._group.addresses)


CONTROLLER = textwrap.dedent("""
    import os, sys
    from mesh_client import this_host
    from mesh_client._src.runtime import unixlinks
    mesh = this_host().spawn_procs(per_host={"procs": 1}, name="sub")
    print(unixlinks.directory(), flush=True)
    if sys.argv[1] == "hang":
        sys.stdin.read()
    mesh.stop()
""")


def _controller(mode):
    env = dict(os.environ)
    env.pop(unixlinks.DIR_ENV, None)
    return subprocess.Popen([sys.executable, "-c", CONTROLLER, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True)


def test_the_directory_goes_when_the_controller_exits_and_after_a_killed_one():
    done = _controller("exit")
    directory = done.stdout.readline().strip()
    assert done.wait(timeout=120) == 0
    assert directory and directory != unixlinks.directory() and not os.path.exists(directory)
    killed = _controller("hang")
    left = killed.stdout.readline().strip()
    assert os.path.isdir(left)
    killed.kill()
    killed.wait(timeout=60)
    assert os.path.isdir(left)  # a killed controller removes nothing
    after = _controller("exit")
    assert after.stdout.readline().strip()
    assert after.wait(timeout=120) == 0
    assert not os.path.exists(left)


def test_the_controllers_own_proc_server_listens_on_unix_too():
    group = this_proc()._group
    address = group.addresses[0]
    assert stat.S_ISSOCK(os.lstat(unixlinks.path_for(address)).st_mode)
    link = _connect(address, group.token, _unix_only)  # where procs send the values of its ports
    assert unixlinks.family(link.stream) == socket.AF_UNIX
    link.close("test")
