"""Where one 1 MiB echo spends its time: perf_counter_ns stamps on both sides, both directions.

Used by ``benchmarks/actors.py --large``. As in :mod:`call_stages`, nothing here is in the
product: :func:`install` wraps a few runtime functions *in an instrumented run only* (the
controller, and the proc through ``spawn_procs(bootstrap=install)``). CLOCK_MONOTONIC is shared
by the processes of one host, so stamps of the two sides subtract. Calls are sequential.

Besides the stages that tile the call, each direction reports what the receiving side did with
the frame: its first wake-up after the sender's ``sendmsg`` began, the time to set up the frame's
receive buffers (header, allocation, the first read's bytes), how many reads the frame took and
how large they were. :func:`floors` measures, in the same run, what the machine allows: a raw
echo between two processes receiving into a preallocated buffer (no copy but the kernel's), and
the single operations a receiver may pay (allocating a zeroed buffer, copying 1 MiB).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import timeit
from typing import Any

_now = time.perf_counter_ns
_log: dict[int, dict[str, Any]] = {}
_local = threading.local()  # .call_id: the call this thread works on; .pickled: (t0, t1) of the last dumps
_frame: list[dict[str, Any]] = [{}]  # the frame being received on this process's I/O thread
_installed = [False]
MIB = 1 << 20


def _stamp(call_id: int | None, name: str, value: Any) -> None:
    if call_id is not None and call_id > 0:
        _log.setdefault(call_id, {})[name] = value


def install() -> None:
    """Wrap the runtime's hand-off points in this process (idempotent)."""
    if _installed[0]:
        return
    _installed[0] = True
    from mesh_client._src.runtime import channel, futures, peers, streams
    from mesh_client._src.server import actors, dispatch
    from mesh_client._src.wire import protocol, serialization

    on_readable = channel.Channel.on_readable

    def readable(self: Any) -> None:
        t = _now()
        fresh = getattr(self.conn, "_big", None) is None  # no large frame in progress: a frame starts
        before = self.bytes_received
        if fresh:
            _frame[0] = {"first": t, "reads": []}
        frame = _frame[0]  # the decode in this read keeps a reference: its last read is added below
        on_readable(self)
        frame["reads"].append(self.bytes_received - before)
        frame["last_read"] = t

    channel.Channel.on_readable = readable  # type: ignore[method-assign]

    # Setting up a large frame's buffers (header, allocation, the first read's bytes).
    for name in ("_parse_small", "_start_large"):
        if hasattr(protocol.Connection, name):
            original = getattr(protocol.Connection, name)

            def timed(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                t0 = _now()
                result = _original(self, *args, **kwargs)
                if getattr(self, "_big", None) is not None and "setup_ns" not in _frame[0]:
                    _frame[0]["setup_ns"] = _now() - t0
                return result

            setattr(protocol.Connection, name, timed)
            break

    write = streams.SocketStream.write

    def timed_write(self: Any, pieces: Any) -> None:
        cid = getattr(_local, "call_id", None)
        _stamp(cid, "write_in", _now())
        write(self, pieces)
        _stamp(cid, "write_out", _now())

    streams.SocketStream.write = timed_write  # type: ignore[method-assign]

    dumps = serialization.dumps

    def timed_dumps(obj: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = _now()
        out = dumps(obj, *args, **kwargs)
        _local.pickled = (t0, _now())
        if getattr(_local, "in_actor", False):  # the proc: the reply's pickling
            _stamp(getattr(_local, "call_id", None), "dumped", _local.pickled[1])
        return out

    serialization.dumps = timed_dumps

    loads = serialization.loads

    def timed_loads(segments: Any) -> Any:
        out = loads(segments)
        _stamp(getattr(_local, "call_id", None), "loaded", _now())
        return out

    serialization.loads = timed_loads

    # The hot paths call the packers and decoders through names their modules looked up once
    # (peers._request_frame, dispatch._decode_request, peers._reply_head): those are wrapped.
    request_frame = peers._request_frame  # every request's frame (peers.Peer.submit)

    def timed_encode(call_id: int, op: int, fields: bytes, payload: Any) -> Any:
        _local.call_id = call_id
        pickled = getattr(_local, "pickled", None)
        if pickled is not None:
            _stamp(call_id, "pickled", pickled[1])
        return request_frame(call_id, op, fields, payload)

    peers._request_frame = timed_encode

    def attach(call_id: int, t: int) -> None:
        _stamp(call_id, "decode", t)
        _stamp(call_id, "frame", _frame[0])

    decode_request = dispatch._decode_request

    def timed_decode_request(segments: Any) -> Any:
        t = _now()
        request = decode_request(segments)
        attach(request[0], t)
        return request

    dispatch._decode_request = timed_decode_request

    reply_head = peers._reply_head

    def timed_reply_head(segments: Any) -> Any:
        t = _now()
        head = reply_head(segments)
        attach(head[0], t)
        _local.reply_id = head[0]
        return head

    peers._reply_head = timed_reply_head

    set_raw = futures.Future.set_raw

    def timed_set_raw(self: Any, raw: Any) -> bool:
        done = set_raw(self, raw)
        cid = getattr(_local, "reply_id", None)
        if cid is not None:
            _local.reply_id = None
            _stamp(cid, "resolved", _now())
        return done

    futures.Future.set_raw = timed_set_raw  # type: ignore[method-assign]

    wait = futures.Future._wait

    def timed_wait(self: Any, timeout: Any) -> None:
        wait(self, timeout)
        _stamp(getattr(_local, "call_id", None), "woken", _now())

    futures.Future._wait = timed_wait  # type: ignore[method-assign]

    init = actors.ActorRunner.__init__

    def timed_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        put = self.put  # what the reactor queues every call with

        def timed_put(work: Any) -> None:
            if work is not None:
                _stamp(work[0], "submit", _now())
            put(work)

        self.put = timed_put

    actors.ActorRunner.__init__ = timed_init  # type: ignore[method-assign]

    call = actors.ActorRunner._call

    def timed_call(self: Any, call_id: int, *rest: Any) -> Any:
        _local.call_id = call_id
        _local.in_actor = True
        _stamp(call_id, "call_in", _now())
        try:
            return call(self, call_id, *rest)
        finally:
            _stamp(call_id, "call_out", _now())

    actors.ActorRunner._call = timed_call  # type: ignore[method-assign]


def take() -> dict[int, dict[str, Any]]:
    """This process's stamps so far, cleared."""
    out = dict(_log)
    _log.clear()
    return out


# Stage name, (process, stamp) it starts at, (process, stamp) it ends at; C = controller, P = proc.
STAGES: list[tuple[str, tuple[str, str], tuple[str, str]]] = [
    ("caller: pickle the 1 MiB argument", ("C", "start"), ("C", "pickled")),
    ("caller: future, envelope, frame", ("C", "pickled"), ("C", "write_in")),
    ("request: sendmsg to the last read parsed (proc)", ("C", "write_in"), ("P", "decode")),
    ("proc: dispatch (envelope, queue)", ("P", "decode"), ("P", "submit")),
    ("actor thread wake-up", ("P", "submit"), ("P", "call_in")),
    ("actor: unpickle the argument", ("P", "call_in"), ("P", "loaded")),
    ("actor: run (returns the same object)", ("P", "loaded"), ("P", "call_out")),
    ("actor: pickle the reply", ("P", "call_out"), ("P", "dumped")),
    ("actor: reply envelope + frame", ("P", "dumped"), ("P", "write_in")),
    ("reply: sendmsg to the last read parsed (caller)", ("P", "write_in"), ("C", "decode")),
    ("caller I/O: envelope, resolve future", ("C", "decode"), ("C", "resolved")),
    ("caller thread wake-up", ("C", "resolved"), ("C", "woken")),
    ("caller: unpickle the reply", ("C", "woken"), ("C", "loaded")),
    ("caller: rest of get()", ("C", "loaded"), ("C", "end")),
]

# Inside the two transfers (overlapping the stages above, not adding to them).
DETAILS: list[tuple[str, tuple[str, str], tuple[str, str]]] = [
    ("request: sendmsg of the frame (caller)", ("C", "write_in"), ("C", "write_out")),
    ("request: sendmsg to proc's first wake-up", ("C", "write_in"), ("P", "first")),
    ("request: proc's first to last read", ("P", "first"), ("P", "last_read")),
    ("reply: sendmsg of the frame (proc)", ("P", "write_in"), ("P", "write_out")),
    ("reply: sendmsg to caller's first wake-up", ("P", "write_in"), ("C", "first")),
    ("reply: caller's first to last read", ("C", "first"), ("C", "last_read")),
]


def _flat(stamps: dict[str, Any]) -> dict[str, Any]:
    frame = stamps.get("frame") or {}
    return dict(stamps, first=frame.get("first"), last_read=frame.get("last_read"))


def stage_samples(
    calls: list[tuple[int, int, int]], proc: dict[int, dict[str, Any]], controller: dict[int, dict[str, Any]]
) -> dict[str, list[float]]:
    """Per stage and detail, the microseconds of every call that has all its stamps; also the
    receive side's buffer setup and reads per frame. ``calls``: ``(call_id, start_ns, end_ns)``."""
    rows = STAGES + DETAILS
    out: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    extra = ("request: proc's buffer setup", "request: reads per frame", "request: bytes of the first read",
             "request: bytes of the largest read", "reply: caller's buffer setup", "reply: reads per frame",
             "reply: bytes of the first read", "reply: bytes of the largest read")
    out.update({name: [] for name in extra})
    out["total"] = []
    for call_id, start, end in calls:
        stamps = {"C": _flat(dict(controller.get(call_id, {}), start=start, end=end)), "P": _flat(proc.get(call_id, {}))}
        try:
            values = [(stamps[b[0]][b[1]] - stamps[a[0]][a[1]]) / 1000 for _, a, b in rows]
        except (KeyError, TypeError):
            continue  # a stamp is missing (a call id the wrappers did not see)
        for (name, _, _), value in zip(rows, values):
            out[name].append(value)
        for side, prefix in (("P", "request"), ("C", "reply")):
            frame = stamps[side]["frame"]
            if "setup_ns" in frame:
                out[f"{prefix}: {'proc' if side == 'P' else 'caller'}'s buffer setup"].append(frame["setup_ns"] / 1000)
            out[f"{prefix}: reads per frame"].append(len(frame["reads"]))
            out[f"{prefix}: bytes of the first read"].append(float(frame["reads"][0]))
            out[f"{prefix}: bytes of the largest read"].append(float(max(frame["reads"])))
        out["total"].append((end - start) / 1000)
    return out


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def measure(calls: int, payload: str = "bytes") -> dict[str, dict[str, float]]:
    """An instrumented run: one proc, ``calls`` sequential 1 MiB echoes of ``payload``
    (``bytes``, ``bytearray``, ``numpy`` or ``torch``), p50/p99 per stage."""
    import mesh_client

    here = __file__

    def load_here() -> Any:
        """This file as module ``large_stages`` in a proc (which need not have benchmarks/ on its path)."""
        import importlib.util
        import sys

        module = sys.modules.get("large_stages")
        if module is None:
            spec = importlib.util.spec_from_file_location("large_stages", here)
            assert spec is not None and spec.loader is not None
            module = sys.modules["large_stages"] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        return module

    class Probe(mesh_client.Actor):
        @mesh_client.endpoint
        def echo(self, value: Any) -> Any:
            return value

        @mesh_client.endpoint
        def stamps(self) -> dict[int, dict[str, Any]]:
            return load_here().take()  # type: ignore[no-any-return]

    blob = make_payload(payload)
    procs = mesh_client.this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=lambda: load_here().install())
    try:
        probe = procs.spawn("probe", Probe)
        install()
        for _ in range(30):
            probe.echo.call_one(blob).get()
        take()
        probe.stamps.call_one().get()
        measured: list[tuple[int, int, int]] = []
        controller: dict[int, dict[str, Any]] = {}
        for _ in range(calls):
            t = _now()
            probe.echo.call_one(blob).get()
            end = _now()
            mine = take()
            controller.update(mine)
            if len(mine) == 1:
                measured.append((next(iter(mine)), t, end))
        proc = probe.stamps.call_one().get()
    finally:
        procs.stop().get()
    samples = stage_samples(measured, proc, controller)
    return {name: {"p50_us": pct(v, 0.5), "p99_us": pct(v, 0.99), "n": len(v)} for name, v in samples.items()}


def make_payload(kind: str) -> Any:
    """1 MiB of random data as ``bytes``, ``bytearray``, a numpy ``uint8`` array or a torch CPU tensor."""
    data = os.urandom(MIB)
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "numpy":
        import numpy

        return numpy.frombuffer(bytearray(data), dtype=numpy.uint8)
    if kind == "torch":
        import torch

        return torch.randn(MIB // 4)
    raise ValueError(f"unknown payload kind {kind!r}: use bytes, bytearray or numpy")


# The floor: two processes, one connection, each side receives into a buffer allocated once.
# Over TCP (it prints its port) or, with arguments ``unix PATH``, over AF_UNIX (it prints "ready").

# What follows actors.SERVER_PRELUDE (joined in raw_floor: procs load this file without actors).
FLOOR_BODY = r"""
buf = bytearray(1 << 20); view = memoryview(buf)
while True:
    got = 0
    while got < len(buf):
        k = conn.recv_into(view[got:])
        if not k: sys.exit(0)
        got += k
    conn.sendall(view)
"""


def raw_floor(rounds: int, transport: str = "tcp") -> dict[str, float]:
    """p50 of a 1 MiB echo that copies nothing in user space (recv_into one preallocated buffer,
    send that buffer back): what the kernel's two copies per direction and the wake-ups cost,
    over ``transport``: "tcp", or "unix" (what local procs use)."""
    import tempfile

    import actors  # the raw servers' common start

    workdir = tempfile.mkdtemp(prefix="pm-floor-")
    server, sock = actors.start_server(actors.SERVER_PRELUDE + FLOOR_BODY, transport, workdir)
    try:
        out = memoryview(os.urandom(MIB))
        buf = bytearray(MIB)
        view = memoryview(buf)
        lat = []
        reads = []
        for i in range(rounds + 20):
            t = time.perf_counter()
            sock.sendall(out)
            got = n = 0
            while got < MIB:
                got += sock.recv_into(view[got:])
                n += 1
            if i >= 20:
                lat.append(time.perf_counter() - t)
                reads.append(n)
        sock.close()
        return {"echo_1mib_p50_us": pct(lat, 0.5) * 1e6, "reads_per_reply_p50": pct([float(r) for r in reads], 0.5)}
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def floors(rounds: int) -> dict[str, float]:
    """The raw copy-free echo and the single operations a receiver may pay, in this run."""
    buf = bytearray(MIB)
    data = bytes(MIB)
    number = 200
    unix = raw_floor(rounds, "unix")
    return {
        **raw_floor(rounds),
        "unix_echo_1mib_p50_us": unix["echo_1mib_p50_us"],
        "unix_reads_per_reply_p50": unix["reads_per_reply_p50"],
        "bytearray_1mib_zeroed_us": timeit.timeit(lambda: bytearray(MIB), number=number) / number * 1e6,
        "bytes_copy_1mib_us": timeit.timeit(lambda: bytes(buf), number=number) / number * 1e6,
        "bytearray_copy_1mib_us": timeit.timeit(lambda: bytearray(data), number=number) / number * 1e6,
    }
