"""Reading a local peer's memory (runtime/peermemory.py), against a real second process.

Aspects: a reader reads a ``bytes`` object of another process at the address that process
gives, into a new ``bytes``; an address that is not mapped there, and a process that exited,
raise OSError (never garbage); the peer of an AF_UNIX connection is named by the kernel
(SO_PEERCRED), not by anything it says, and a TCP connection or this process itself gets no
reader; PROCMESH_PEER_READS=0 turns reading off; a probe is this process's own.
"""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from mesh_client._src.runtime import peermemory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process_vm_readv is Linux's")

HOLDER = textwrap.dedent(
    """
    import os, socket, sys
    from mesh_client._src.runtime import peermemory
    data = os.urandom(300_000)
    if len(sys.argv) > 1:  # connect to the test's unix listener first
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
    print(peermemory.address_of(data), data.hex(), flush=True)
    sys.stdin.readline()
    """
)


def holder(*args: str) -> tuple[subprocess.Popen, int, bytes]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    address, content = proc.stdout.readline().split()
    return proc, int(address), bytes.fromhex(content)


def test_reads_are_enabled_here():
    assert peermemory.enabled()  # Linux with ctypes: CI must exercise the path, not skip it


def test_a_reader_reads_another_process_s_bytes_and_nothing_that_is_not_there():
    proc, address, content = holder()
    try:
        reader = peermemory.Reader(proc.pid)
        got = reader.pull(address, len(content))
        assert type(got) is bytes and got == content
        assert reader.pull(address + 1000, 5000) == content[1000:6000]
        with pytest.raises(OSError):
            reader.pull(8, 4096)  # the zero page is never mapped
    finally:
        proc.communicate("\n")
    with pytest.raises(OSError):
        reader.pull(address, len(content))  # it exited


def test_the_kernel_names_the_peer_of_a_unix_connection(tmp_path):
    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    proc, address, content = holder(path)
    conn, _ = listener.accept()
    try:
        reader = peermemory.reader_for(conn)
        assert reader is not None and reader.pid == proc.pid
        assert reader.pull(address, 64) == content[:64]
    finally:
        proc.communicate("\n")
        conn.close()
        listener.close()


def test_no_reader_over_tcp_for_oneself_or_when_turned_off(monkeypatch):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    assert peermemory.reader_for(a) is None  # the peer is this process
    tcp = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(tcp.getsockname())
    assert peermemory.reader_for(client) is None
    monkeypatch.setenv(peermemory.ENV, "0")
    assert not peermemory.enabled()
    for s in (a, b, tcp, client):
        s.close()


def test_the_probe_is_this_process_s():
    probe = peermemory.probe()
    assert peermemory.probe() is probe and len(probe) == 32
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, peermemory.probe())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(r, 64)
    assert len(child) == 32 and child != probe  # a forked child makes its own
