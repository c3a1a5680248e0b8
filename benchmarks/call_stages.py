"""Where one ``call_one`` spends its time: perf_counter_ns stamps at each hand-off, both sides.

Used by ``benchmarks/actors.py --breakdown``. Nothing here is in the product: :func:`install`
wraps a handful of runtime functions *in an instrumented run only* (the controller, and every
proc through ``spawn_procs(bootstrap=install)``), so the stamps cost nothing when off. The
clock is CLOCK_MONOTONIC, shared by all processes of one host, so a client stamp and a server
stamp of the same call can be subtracted. Calls must be sequential (one in flight), which is
what a latency figure measures anyway.

Stamps, keyed by call id, in the process that takes them:

    controller: encode (request envelope made), write_in (sendmsg called), readable (I/O
                thread woke), decode (reply frame parsed), resolved (future completed), woken
                (the caller's get() returned from its wait)
    proc:       readable (I/O thread woke), decode (request frame parsed), submit (queued for
                the actor), call_in/call_out (the actor thread runs the endpoint), write_in
                (the reply's sendmsg called)
"""

from __future__ import annotations

import threading
import time
from typing import Any

_now = time.perf_counter_ns
_log: dict[int, dict[str, int]] = {}
_local = threading.local()  # .call_id: the call this thread works on (caller, actor thread)
_readable: list[int] = [0]  # the I/O thread's last wake-up, claimed by the next frame parsed
_installed = [False]


def _stamp(call_id: int | None, name: str, t: int) -> None:
    if call_id is not None and call_id > 0:
        _log.setdefault(call_id, {})[name] = t


def install() -> None:
    """Wrap the runtime's hand-off points in this process (idempotent)."""
    if _installed[0]:
        return
    _installed[0] = True
    from mesh_client._src.runtime import channel, futures, peers, streams
    from mesh_client._src.server import actors, dispatch

    on_readable = channel.Channel.on_readable

    def readable(self: Any) -> None:
        _readable[0] = _now()
        on_readable(self)

    channel.Channel.on_readable = readable  # type: ignore[method-assign]

    write = streams.SocketStream.write

    def timed_write(self: Any, pieces: Any) -> None:
        _stamp(getattr(_local, "call_id", None), "write_in", _now())
        write(self, pieces)

    streams.SocketStream.write = timed_write  # type: ignore[method-assign]

    # The hot paths call the packers and decoders through names their modules looked up once
    # (peers._request_frame, dispatch._decode_request, peers._reply_head): those are wrapped.
    request_frame = peers._request_frame

    def timed_encode(call_id: int, op: int, fields: bytes, payload: Any) -> Any:
        _local.call_id = call_id
        _stamp(call_id, "encode", _now())
        return request_frame(call_id, op, fields, payload)

    peers._request_frame = timed_encode

    decode_request = dispatch._decode_request

    def timed_decode_request(segments: Any) -> Any:
        t = _now()
        request = decode_request(segments)
        _stamp(request[0], "readable", _readable[0])
        _stamp(request[0], "decode", t)
        return request

    dispatch._decode_request = timed_decode_request

    reply_head = peers._reply_head

    def timed_reply_head(segments: Any) -> Any:
        t = _now()
        head = reply_head(segments)
        _stamp(head[0], "readable", _readable[0])
        _stamp(head[0], "decode", t)
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
        _stamp(call_id, "call_in", _now())
        try:
            return call(self, call_id, *rest)
        finally:
            _stamp(call_id, "call_out", _now())

    actors.ActorRunner._call = timed_call  # type: ignore[method-assign]


def take() -> dict[int, dict[str, int]]:
    """This process's stamps so far, cleared."""
    out = dict(_log)
    _log.clear()
    return out


# Stage name, (process, stamp) it starts at, (process, stamp) it ends at; C = controller, P = proc.
STAGES: list[tuple[str, tuple[str, str], tuple[str, str]]] = [
    ("caller: pickle args, future, peer", ("C", "start"), ("C", "encode")),
    ("caller: envelope + frame", ("C", "encode"), ("C", "write_in")),
    # On loopback the receiver often runs before sendmsg returns: one stage from sendmsg to the
    # peer's I/O thread running, so that no stage is negative.
    ("sendmsg, loopback, proc I/O thread wake-up", ("C", "write_in"), ("P", "readable")),
    ("proc: recv + parse frame", ("P", "readable"), ("P", "decode")),
    ("proc: dispatch (envelope, queue)", ("P", "decode"), ("P", "submit")),
    ("actor thread wake-up", ("P", "submit"), ("P", "call_in")),
    ("actor: unpickle, run, context", ("P", "call_in"), ("P", "call_out")),
    ("actor: pickle reply + frame", ("P", "call_out"), ("P", "write_in")),
    ("sendmsg, loopback, caller I/O thread wake-up", ("P", "write_in"), ("C", "readable")),
    ("caller I/O: recv + parse frame", ("C", "readable"), ("C", "decode")),
    ("caller I/O: envelope, resolve future", ("C", "decode"), ("C", "resolved")),
    ("caller thread wake-up", ("C", "resolved"), ("C", "woken")),
    ("caller: decode reply", ("C", "woken"), ("C", "end")),
]


def stage_samples(
    calls: list[tuple[int, int, int]], proc: dict[int, dict[str, int]], controller: dict[int, dict[str, int]]
) -> dict[str, list[float]]:
    """Per stage, the microseconds of every call that has all its stamps.
    ``calls`` is ``(call_id, start_ns, end_ns)`` as the benchmark measured them."""
    out: dict[str, list[float]] = {name: [] for name, _, _ in STAGES}
    out["total"] = []
    for call_id, start, end in calls:
        stamps = {"C": dict(controller.get(call_id, {}), start=start, end=end), "P": proc.get(call_id, {})}
        try:
            values = [(stamps[b[0]][b[1]] - stamps[a[0]][a[1]]) / 1000 for _, a, b in STAGES]
        except KeyError:
            continue  # a stamp is missing (a call id the wrappers did not see)
        for (name, _, _), value in zip(STAGES, values):
            out[name].append(value)
        out["total"].append((end - start) / 1000)
    return out


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def measure(calls: int, spin_ms: float = 0.0) -> dict[str, dict[str, float]]:
    """An instrumented run: one proc, ``calls`` sequential ``call_one``s, p50/p99 per stage. Each
    call is a no-op, or with ``spin_ms`` an endpoint that keeps its thread busy that long (a
    step, as benchmarks/idle_calls.py's): the stages then show which wake-ups a long step makes dear."""
    import mesh_client

    here = __file__

    def load_here() -> Any:
        """This file as module ``call_stages`` in a proc (which need not have benchmarks/ on its path)."""
        import importlib.util
        import sys

        module = sys.modules.get("call_stages")
        if module is None:
            spec = importlib.util.spec_from_file_location("call_stages", here)
            assert spec is not None and spec.loader is not None
            module = sys.modules["call_stages"] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        return module

    class Probe(mesh_client.Actor):
        @mesh_client.endpoint
        def noop(self) -> None:
            if spin_ms:
                start = time.perf_counter()
                while time.perf_counter() - start < spin_ms / 1000:
                    pass

        @mesh_client.endpoint
        def stamps(self) -> dict[int, dict[str, int]]:
            return load_here().take()  # type: ignore[no-any-return]

    procs = mesh_client.this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=lambda: load_here().install())
    try:
        probe = procs.spawn("probe", Probe)
        install()
        for _ in range(300):
            probe.noop.call_one().get()
        take()
        probe.stamps.call_one().get()
        measured: list[tuple[int, int, int]] = []
        controller: dict[int, dict[str, int]] = {}
        for _ in range(calls):
            t = _now()
            probe.noop.call_one().get()
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
