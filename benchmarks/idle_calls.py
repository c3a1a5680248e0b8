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

    python benchmarks/idle_calls.py                 # table
    python benchmarks/idle_calls.py --json          # JSON
    python benchmarks/idle_calls.py --calls 100     # calls per figure (default 60)
    python benchmarks/idle_calls.py --breakdown     # also call_one's stages, no-op against a 25 ms spin

The breakdown (``call_stages.py``'s instrumented run) says which of the call's hand-offs a long
step makes dear: each thread that slept through the step pays its wake-up.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import struct
import tempfile
import time
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


def procmesh_figures(calls: int, wake_ahead: bool = True) -> dict[str, Any]:
    """What a call adds around each step, and how many of the calls' waits woke ahead
    (``runtime/ahead.py``); ``wake_ahead=False``: turned off in the controller and the procs."""
    from mesh_client import Actor, default_bootstrap_cmd, endpoint, this_host
    from mesh_client._src.runtime import ahead, waits

    class Worker(Actor):
        @endpoint
        def work(self, kind: str, ms: float) -> float:
            return work(kind, ms)

    setting = waits.WAKE_AHEAD_NS
    bootstrap = default_bootstrap_cmd()
    if not wake_ahead:
        waits.WAKE_AHEAD_NS = 0
        bootstrap = bootstrap.with_env({"PROCMESH_WAKE_AHEAD_US": "0"})
    added, woken = {}, {}
    try:
        with this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=lambda point: bootstrap,
                                     name="idle") as procs:
            worker = procs.spawn("worker", Worker)
            for kind in KINDS:
                for ms in STEPS_MS:
                    before = ahead.woken
                    key = f"{kind}_{ms:g}ms"
                    added[key] = added_us(partial(lambda k, m: worker.work.call_one(k, m).get(), kind, ms), calls)
                    woken[key] = ahead.woken - before
    finally:
        waits.WAKE_AHEAD_NS = setting
    return {"added_us": added, "woke_ahead": woken}


def raw_figures(calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        server, sock = start_server(WORK_SERVER, "unix", workdir)
        try:
            def roundtrip(kind: str, ms: float) -> float:
                data = pickle.dumps((kind, ms), protocol=5)
                sock.sendall(struct.pack("!Q", len(data)) + data)
                (n,) = struct.unpack("!Q", sock.recv(8, 0x100))  # MSG_WAITALL
                return float(pickle.loads(sock.recv(n, 0x100)))

            return {
                f"{kind}_{ms:g}ms": added_us(partial(roundtrip, kind, ms), calls)
                for kind in KINDS for ms in STEPS_MS
            }
        finally:
            sock.close()
            server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=60, help="calls per figure")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--breakdown", action="store_true", help="also the stages of a call_one, no-op and 25 ms spin")
    args = parser.parse_args()
    ours, off, raw = procmesh_figures(args.calls), procmesh_figures(args.calls, wake_ahead=False), raw_figures(args.calls)
    stages = {}
    if args.breakdown:
        import call_stages

        stages = {f"spin_{ms:g}ms": call_stages.measure(args.calls, ms) for ms in (0.0, 25.0)}
    if args.json:
        print(json.dumps({"procmesh_added_us": ours["added_us"], "procmesh_woke_ahead": ours["woke_ahead"],
                          "procmesh_no_wake_ahead_added_us": off["added_us"], "raw_unix_added_us": raw,
                          "stages": stages}, indent=2))
        return
    print(f"{'step':>14} | {'procmesh adds (us)':>18} | {'waits woke ahead':>16} | {'wake-ahead off':>14} | "
          f"{'raw unix adds (us)':>18}")
    for key in raw:
        print(f"{key:>14} | {ours['added_us'][key]:18.1f} | {ours['woke_ahead'][key]:16d} | "
              f"{off['added_us'][key]:14.1f} | {raw[key]:18.1f}")
    if stages:
        print(f"\n{'call_one stage, p50 us':<48} | {'no-op':>8} | {'25 ms spin':>10}")
        for name in stages["spin_0ms"]:
            print(f"{name:<48} | {stages['spin_0ms'][name]['p50_us']:8.1f} | {stages['spin_25ms'][name]['p50_us']:10.1f}")


if __name__ == "__main__":
    main()
