"""What a proc server gives connections that have not authenticated, on a real proc server.

Aspects: a TCP connect and close (a probe) is never logged; garbage is logged as a refusal, and
a burst of refusals as one line; the refusals a stopping proc counted but had not written yet
are written as it stops; a garbage sender that resets at once, before the proc accepted it or
before it read, is counted once like any other; at most PROCMESH_MAX_UNAUTHENTICATED connections may be in the
handshake, a newcomer beyond it closes the oldest, so connections held idle lock out neither the
authenticated client nor a new one; with
RLIMIT_NOFILE=64 and 100 idle connections the server backs off instead of spinning, keeps
serving its client, and serves a new client once descriptors are free.
"""

import os
import re
import select
import signal
import socket
import struct
import time

from benchmarks import flooding
from mesh_client import this_host
from mesh_client._src.runtime import identifying
from tests.integration.local.actors import Caller
from tests.integration.local.single_proc import single_proc, wait_until

HELLO_BYTES = 48  # header, one length, a 32-byte nonce


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def refusals(proc):
    return [line for line in proc.log_lines() if "refused" in line]


def summaries_allowed(started):
    """Summary lines a rate-limited log may add: one per 10 s period since ``started``."""
    return 1 + int((time.monotonic() - started) // 10)


def full_and_summary(lines, full_prefix, what):
    full = [line for line in lines if line.startswith(full_prefix)]
    summaries = [line for line in lines if " more " + what + " in the last " in line]
    return full, summaries


def settled(proc, descriptors):
    """The proc holds no more descriptors than it did before (every test connection is closed)."""
    return lambda: flooding.open_descriptors(proc.pid) <= descriptors


def test_probes_are_not_logged_but_garbage_is(tmp_path):
    with single_proc(tmp_path) as proc:
        before = flooding.open_descriptors(proc.pid)
        for i in range(50):
            probe = connect(proc.port)
            if i % 2:  # close with the HELLO unread: the proc sees a reset, as from kubelet's probes
                select.select([probe], [], [], 10)
            probe.close()
        wait_until(settled(proc, before), "the proc to close every probe")
        with connect(proc.port) as attacker:
            attacker.sendall(b"GET / HTTP/1.1\r\n\r\n")
            wait_until(lambda: refusals(proc), "the refusal line")
        wait_until(settled(proc, before), "the proc to close the attacker")
        lines = refusals(proc)
        assert len(lines) == 1 and "bad frame magic" in lines[0], proc.log_lines()


def test_a_burst_of_refusals_is_logged_as_one_line(tmp_path):
    with single_proc(tmp_path) as proc:
        before = flooding.open_descriptors(proc.pid)
        started = time.monotonic()
        for _ in range(200):
            with connect(proc.port) as attacker:
                attacker.sendall(b"\x00" * 64)
                # Until the proc has read the garbage and closed: a proc slow to accept (a loaded
                # machine) may have taken none of the 200 from its backlog when the loop ends, and
                # settled() (no more descriptors than before) then holds before any refusal is
                # logged. A reset does not hide the garbage: the proc reads it first (below).
                closed_by_the_proc(attacker)
        wait_until(settled(proc, before), "the proc to close every attacker")
        full, summaries = full_and_summary(proc.log_lines(), "procmesh: refused connection", "refused connections")
        assert len(full) == 1 and len(summaries) <= summaries_allowed(started), proc.log_lines()
        assert proc.actor.echo.call_one("still served").get(timeout=30) == "still served"


def closed_by_the_proc(sock):
    """The proc closed ``sock`` (its HELLO, if unread, comes first)."""
    sock.settimeout(30)
    try:
        while sock.recv(1024):
            pass
    except ConnectionResetError:
        pass
    return True


def refusals_told(lines):
    """Refused connections the log tells of: one per full line, N per "N more" summary."""
    told = 0
    for line in lines:
        if line.startswith("procmesh: refused connection from"):
            told += 1
        elif found := re.match(r"procmesh: (\d+) more refused connections in the last ", line):
            told += int(found.group(1))
    return told


def reset(sock):
    """Close with a reset (SO_LINGER 0), as a scanner does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_refusals_not_yet_summarised_are_written_as_the_proc_stops(tmp_path):
    with single_proc(tmp_path) as proc:
        for _ in range(5):
            with connect(proc.port) as attacker:
                attacker.sendall(b"GET / HTTP/1.1\r\n\r\n")
                closed_by_the_proc(attacker)
        # The proc stops within the 10 s period that counts the last four.
    wait_until(lambda: refusals_told(proc.log_lines()) >= 5, "the stopped proc to tell of its 5 refusals")
    assert refusals_told(proc.log_lines()) == 5, proc.log_lines()


GARBAGE = b"GET / HTTP/1.1\r\n\r\n"


def test_a_garbage_sender_that_resets_at_once_is_refused_once(tmp_path):
    with single_proc(tmp_path) as proc:
        before = flooding.open_descriptors(proc.pid)
        # Reset before the proc accepted: stopped, it takes the connections from its backlog
        # only after the resets (its HELLO then meets the reset, and the garbage is read after).
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for _ in range(10):
                garbage = connect(proc.port)
                garbage.sendall(GARBAGE)
                reset(garbage)
                reset(connect(proc.port))  # a probe reset at once: not a refusal
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: flooding.accept_backlog(proc.pid, proc.port) == 0, "the proc to accept the backlog")
        wait_until(settled(proc, before), "the proc to close the connections it accepted")
        # Reset after the proc accepted and said HELLO, before it read anything.
        accepted = []
        for _ in range(10):
            sock = connect(proc.port)
            assert len(sock.recv(1024)) == HELLO_BYTES
            accepted.append(sock)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for sock in accepted:
                sock.sendall(GARBAGE)
                reset(sock)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(settled(proc, before), "the proc to close the reset connections")
    wait_until(lambda: refusals_told(proc.log_lines()) >= 20, "the stopped proc to tell of its 20 refusals")
    lines = proc.log_lines()
    assert refusals_told(lines) == 20, lines
    assert all("bad frame magic" in line for line in lines if "refused" in line), lines


def test_beyond_the_cap_the_oldest_stranger_makes_room(tmp_path):
    with single_proc(tmp_path, env={"PROCMESH_MAX_UNAUTHENTICATED": "4"}) as proc:
        before = flooding.open_descriptors(proc.pid)
        held = []
        for _ in range(4):
            sock = connect(proc.port)
            assert len(sock.recv(1024)) == HELLO_BYTES  # admitted: the server said HELLO
            held.append(sock)
        with connect(proc.port) as newcomer:
            assert len(newcomer.recv(1024)) == HELLO_BYTES  # admitted too
            assert closed_by_the_proc(held[0])  # the oldest made room
        # While idle strangers hold the whole budget, a new client still authenticates.
        assert identifying.identify_proc(("127.0.0.1", proc.port), proc.mesh._group.token, timeout=30)["pid"] == proc.pid
        assert proc.actor.echo.call_one("served").get(timeout=30) == "served"
        for sock in held:
            sock.close()
        wait_until(settled(proc, before), "the proc to close the held connections")
        assert any("evicted to admit a newer connection" in line for line in refusals(proc)), proc.log_lines()


def test_descriptor_exhaustion_backs_off_and_service_resumes(tmp_path):
    with single_proc(tmp_path, nofile=64) as proc:
        started = time.monotonic()
        idle = [connect(proc.port) for _ in range(100)]
        try:
            wait_until(lambda: any("EMFILE" in line for line in proc.log_lines()), "the proc to run out of descriptors")
            cpu_before, wall_before = flooding.cpu_seconds(proc.pid), time.monotonic()
            time.sleep(2.0)
            cpu, wall = flooding.cpu_seconds(proc.pid) - cpu_before, time.monotonic() - wall_before
            # A listener polled while accept() fails would keep a core busy; backing off keeps it idle.
            assert cpu < wall / 4, f"the proc used {cpu:.2f} s of CPU in {wall:.2f} s while out of descriptors"
            # The established client needs no new descriptor and is served throughout.
            assert proc.actor.echo.call_one("during").get(timeout=30) == "during"
            with this_host().spawn_procs(per_host={"procs": 1}, name="newcomer") as other:
                caller = other.spawn("caller", Caller).slice(procs=0)
                pending = caller.relay.call_one(proc.actor, "hello")  # a new connection to the proc
                for sock in idle:
                    sock.close()
                idle = []
                assert pending.get(timeout=60)["answers"] == ["hello"]
        finally:
            for sock in idle:
                sock.close()
        full, summaries = full_and_summary(proc.log_lines(), "procmesh: cannot accept", "accept() failures")
        assert len(full) == 1 and len(summaries) <= summaries_allowed(started), proc.log_lines()


