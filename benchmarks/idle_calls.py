"""What a call costs around a long step: the GPU overhead of issue 14 without a GPU.

A GPU step through an actor costs its step plus a call around it; on one H100 the call around a
25 ms step added 0.66-0.85 ms where a no-op call's round trip is about 0.05 ms
(``results/gpu_sharing.md``). This isolates that on any machine: an actor's endpoint works for
``ms`` milliseconds and returns the seconds it measured inside; the controller times the whole
call around it. What the call adds is the median of (whole - inside), for steps of 0, 1, 5 and
25 ms, and for two kinds of work:

- ``spin``: the actor thread stays busy, as torch's default CUDA synchronize does (it spins);
- ``sleep``: the actor thread blocks, as a blocking synchronize or I/O does.

The same again with waking ahead turned off (``PROCMESH_WAKE_AHEAD_US=0``, ``runtime/ahead.py``),
with the count of the waits that woke ahead. Beside it, in the same run, a raw server (one
thread, AF_UNIX, pickle, as local procs use) that does the same work per message: its
(whole - inside) is the wire's own cost after the same wait.

Two more arms, on request: ``--async`` runs each step in an ``async def`` endpoint (on the
actor's loop; a sleep step awaits ``asyncio.sleep``), which the actor's thread waits for;
``--turns A,B`` alternates a step of A ms and one of B ms through two endpoints on one thread
(a policy's generate, then a trainer's train), each figure that step's own (the raw server
alternates them too).

    python benchmarks/idle_calls.py                 # table
    python benchmarks/idle_calls.py --json          # JSON
    python benchmarks/idle_calls.py --calls 100     # calls per figure (default 60)
    python benchmarks/idle_calls.py --async         # also async def endpoints
    python benchmarks/idle_calls.py --turns 10,25   # also a 10 ms and a 25 ms step taking turns
    python benchmarks/idle_calls.py --breakdown     # also call_one's stages, no-op against a 25 ms spin

The breakdown (``call_stages.py``'s instrumented run) says which of the call's hand-offs a long
step makes dear: each thread that slept through the step pays its wake-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from actors import RECV_EXACT, SERVER_PRELUDE, start_server

STEPS_MS = (0.0, 1.0, 5.0, 25.0)
KINDS = ("spin", "sleep")

# A raw server that works as the actor does: ("spin" | "sleep", ms) -> the seconds inside.
WORK_SERVER = SERVER_PRELUDE + RECV_EXACT + r"""
while True:
    (n,) = struct.unpack("!Q", recv(8))
    kind, ms = pickle.loads(recv(n))
    start = time.perf_counter()
    if kind == "spin":
        while time.perf_counter() - start < ms / 1000: pass
    elif ms:
        time.sleep(ms / 1000)
    data = pickle.dumps(time.perf_counter() - start, protocol=5)
    conn.sendall(struct.pack("!Q", len(data)) + data)
"""


def work(kind: str, ms: float) -> float:
    """Work for ``ms`` ms, spinning or sleeping; the seconds it took."""
    start = time.perf_counter()
    if kind == "spin":
        while time.perf_counter() - start < ms / 1000:
            pass
    elif ms:
        time.sleep(ms / 1000)
    return time.perf_counter() - start


async def work_async(kind: str, ms: float) -> float:
    """Work for ``ms`` ms on an event loop: spinning (it holds the loop, as a blocking CUDA call
    does) or awaiting a sleep; the seconds it took."""
    if kind == "spin":
        return work(kind, ms)
    start = time.perf_counter()
    if ms:
        await asyncio.sleep(ms / 1000)
    return time.perf_counter() - start


def alternating_added_us(call_a: Callable[[], float], call_b: Callable[[], float], calls: int) -> tuple[float, float]:
    """Median microseconds each of ``call_a()`` and ``call_b()`` (-> seconds inside) takes beyond
    its inside, called in turns on this thread, after 3 warm-up turns."""
    extra: tuple[list[float], list[float]] = ([], [])
    for turn in range(3 + calls):
        for call, kept in ((call_a, extra[0]), (call_b, extra[1])):
            start = time.perf_counter()
            inside = call()
            if turn >= 3:
                kept.append(time.perf_counter() - start - inside)
    return 1e6 * statistics.median(extra[0]), 1e6 * statistics.median(extra[1])


def turns_keys(kind: str, turns: tuple[float, float]) -> tuple[str, str]:
    """The figures' names of the first and the second step of a turn."""
    return f"turn1_{kind}_{turns[0]:g}ms", f"turn2_{kind}_{turns[1]:g}ms"


def added_us(call: Any, calls: int) -> float:
    """Median microseconds that ``call()`` (-> seconds inside) takes beyond its inside, after 3 warm-ups."""
    for _ in range(3):
        call()
    extra = []
    for _ in range(calls):
        start = time.perf_counter()
        inside = call()
        extra.append(time.perf_counter() - start - inside)
    return 1e6 * statistics.median(extra)


def procmesh_figures(calls: int, wake_ahead: bool = True, asynchronous: bool = False,
                     turns: tuple[float, float] | None = None) -> dict[str, Any]:
    """What a call adds around each step, and how many of the calls' waits woke ahead
    (``runtime/ahead.py``); ``wake_ahead=False``: turned off in the controller and the procs;
    ``asynchronous``: through ``async def`` endpoints; ``turns``: also two steps taking turns."""
    from mesh_client import Actor, default_bootstrap_cmd, endpoint, this_host
    from mesh_client._src.runtime import ahead, waits

    class Worker(Actor):
        @endpoint
        def work(self, kind: str, ms: float) -> float:
            return work(kind, ms)

        @endpoint
        def other(self, kind: str, ms: float) -> float:  # the second endpoint of a turn
            return work(kind, ms)

    class AsyncWorker(Actor):
        @endpoint
        async def work(self, kind: str, ms: float) -> float:
            return await work_async(kind, ms)

        @endpoint
        async def other(self, kind: str, ms: float) -> float:
            return await work_async(kind, ms)

    setting = waits.WAKE_AHEAD_NS
    bootstrap = default_bootstrap_cmd()
    if not wake_ahead:
        waits.WAKE_AHEAD_NS = 0
        bootstrap = bootstrap.with_env({"PROCMESH_WAKE_AHEAD_US": "0"})
    added, woken = {}, {}
    try:
        with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=lambda point: bootstrap,
                                     name="idle") as procs:
            worker = procs.spawn("worker", AsyncWorker if asynchronous else Worker)
            for kind in KINDS:
                for ms in STEPS_MS:
                    before = ahead.woken
                    key = f"{kind}_{ms:g}ms"
                    added[key] = added_us(partial(lambda k, m: worker.work.call_one(k, m).get(), kind, ms), calls)
                    woken[key] = ahead.woken - before
                if turns is not None:
                    before = ahead.woken
                    first, second = turns_keys(kind, turns)
                    added[first], added[second] = alternating_added_us(
                        partial(lambda k, m: worker.work.call_one(k, m).get(), kind, turns[0]),
                        partial(lambda k, m: worker.other.call_one(k, m).get(), kind, turns[1]), calls)
                    woken[first] = woken[second] = ahead.woken - before  # the turns' together
    finally:
        waits.WAKE_AHEAD_NS = setting
    return {"added_us": added, "woke_ahead": woken}


def raw_figures(calls: int, turns: tuple[float, float] | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        server, sock = start_server(WORK_SERVER, "unix", workdir)
        try:
            def roundtrip(kind: str, ms: float) -> float:
                data = pickle.dumps((kind, ms), protocol=5)
                sock.sendall(struct.pack("!Q", len(data)) + data)
                (n,) = struct.unpack("!Q", sock.recv(8, 0x100))  # MSG_WAITALL
                return float(pickle.loads(sock.recv(n, 0x100)))

            figures = {
                f"{kind}_{ms:g}ms": added_us(partial(roundtrip, kind, ms), calls)
                for kind in KINDS for ms in STEPS_MS
            }
            if turns is not None:
                for kind in KINDS:
                    first, second = turns_keys(kind, turns)
                    figures[first], figures[second] = alternating_added_us(
                        partial(roundtrip, kind, turns[0]), partial(roundtrip, kind, turns[1]), calls)
            return figures
        finally:
            sock.close()
            server.wait(10)


def parse_turns(raw: str) -> tuple[float, float]:
    """``--turns A,B``: two step lengths in ms."""
    try:
        a, b = (float(part) for part in raw.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--turns {raw!r}: give two step lengths in ms, e.g. 10,25") from None
    if a < 0 or b < 0:
        raise argparse.ArgumentTypeError(f"--turns {raw!r}: step lengths cannot be negative")
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=60, help="calls per figure")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--async", dest="asynchronous", action="store_true",
                        help="also through async def endpoints, waking ahead on and off")
    parser.add_argument("--turns", type=parse_turns, metavar="A,B",
                        help="also a step of A ms and one of B ms taking turns through two endpoints")
    parser.add_argument("--breakdown", action="store_true", help="also the stages of a call_one, no-op and 25 ms spin")
    args = parser.parse_args()
    turns = args.turns
    arms = {"def": (procmesh_figures(args.calls, turns=turns),
                    procmesh_figures(args.calls, wake_ahead=False, turns=turns))}
    if args.asynchronous:
        arms["async def"] = (procmesh_figures(args.calls, asynchronous=True, turns=turns),
                             procmesh_figures(args.calls, wake_ahead=False, asynchronous=True, turns=turns))
    raw = raw_figures(args.calls, turns)
    stages = {}
    if args.breakdown:
        import call_stages

        stages = {f"spin_{ms:g}ms": call_stages.measure(args.calls, ms) for ms in (0.0, 25.0)}
    if args.json:
        ours, off = arms["def"]
        out: dict[str, Any] = {"procmesh_added_us": ours["added_us"], "procmesh_woke_ahead": ours["woke_ahead"],
                               "procmesh_no_wake_ahead_added_us": off["added_us"], "raw_unix_added_us": raw,
                               "stages": stages}
        if args.asynchronous:
            ours, off = arms["async def"]
            out.update({"procmesh_async_added_us": ours["added_us"], "procmesh_async_woke_ahead": ours["woke_ahead"],
                        "procmesh_async_no_wake_ahead_added_us": off["added_us"]})
        print(json.dumps(out, indent=2))
        return
    for name, (ours, off) in arms.items():
        print(f"{name + ' endpoint':>18} | {'procmesh adds (us)':>18} | {'waits woke ahead':>16} | "
              f"{'wake-ahead off':>14} | {'raw unix adds (us)':>18}")
        for key in raw:
            print(f"{key:>18} | {ours['added_us'][key]:18.1f} | {ours['woke_ahead'][key]:16d} | "
                  f"{off['added_us'][key]:14.1f} | {raw[key]:18.1f}")
        print()
    if turns is not None:
        print(f"turn1_KIND: the {turns[0]:g} ms step, turn2_KIND: the {turns[1]:g} ms one, taking turns on one "
              "thread through two endpoints; waits woke ahead counts both")
    if stages:
        print(f"\n{'call_one stage, p50 us':<48} | {'no-op':>8} | {'25 ms spin':>10}")
        for name in stages["spin_0ms"]:
            print(f"{name:<48} | {stages['spin_0ms'][name]['p50_us']:8.1f} | {stages['spin_25ms'][name]['p50_us']:10.1f}")


if __name__ == "__main__":
    main()
