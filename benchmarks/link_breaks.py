"""The ``broken-link`` scenario of :mod:`benchmarks.faults`: a cut connection under a live proc
beside a killed proc, interleaved round by round, so load hits both alike.

Per round, one local mesh of two procs whose actor on proc 1 is inside a 1 s call. Half the
rounds cut the controller's TCP connection to proc 1 (``shutdown()`` of the socket underneath:
the proc lives on, :mod:`mesh_client._src.runtime.relinking`), the other half SIGKILL proc 1
(the baseline: a death, which the same code must still report). Figures: time from the cut or
kill to the in-flight call raising, how often that was ``ConnectionBroken`` (cut) or a plain
``SupervisionError`` (kill), time from the cut to the next call answering (and how often it
failed instead), and the supervision faults each caused (a cut: none; a kill: one).

Also runs alone, against whichever ``mesh_client`` is first on the path (an A/B with main)::

    python benchmarks/faults.py --scenario broken-link --rounds 20 [--json]
    cd /work/main && PYTHONPATH=$PWD:$PWD/operator python /path/to/benchmarks/link_breaks.py --rounds 20
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

from benchmarks import scenarios
from benchmarks.scenarios import scenario


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _sleeper() -> type:
    from mesh_client import Actor, endpoint

    class Sleeper(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

        @endpoint
        def sleep(self, seconds: float) -> None:
            time.sleep(seconds)

    return Sleeper


def link_break_figures(rounds: int) -> dict[str, Any]:
    import mesh_client.actor
    from mesh_client import SupervisionError, this_host
    from mesh_client._src.actor import supervision

    # Absent before broken links were told from deaths: then no error is a ConnectionBroken.
    broken: Any = getattr(mesh_client, "ConnectionBroken", ())

    faults: list[Any] = []
    before = mesh_client.actor.unhandled_fault_hook
    mesh_client.actor.unhandled_fault_hook = faults.append  # counted, not ending this program
    error_ms: dict[str, list[float]] = {"cut": [], "kill": []}
    right = {"cut": 0, "kill": 0}
    faults_by = {"cut": 0, "kill": 0}
    next_call_ms: list[float] = []
    next_call_failed = 0
    try:
        for r in range(rounds):
            mode = "cut" if r % 2 == 0 else "kill"
            with this_host().spawn_procs(per_host={"procs": 2}, name=f"lb{r}") as mesh:
                second = mesh.spawn("sleeper", _sleeper()).slice(procs=1)
                pid = second.pid.call_one().get(timeout=60)
                in_flight = second.sleep.call_one(1.0)
                time.sleep(0.05)  # inside sleep()
                seen = len(faults)
                at = time.perf_counter()
                if mode == "cut":
                    mesh._group.peers[1]._channel.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
                else:
                    os.kill(pid, signal.SIGKILL)
                try:
                    in_flight.get(timeout=30)
                except SupervisionError as exc:
                    error_ms[mode].append((time.perf_counter() - at) * 1e3)
                    right[mode] += isinstance(exc, broken) == (mode == "cut")
                if mode == "cut":
                    try:
                        second.pid.call_one().get(timeout=60)  # waits for the sleep the cut did not stop
                        next_call_ms.append((time.perf_counter() - at) * 1e3)
                    except SupervisionError:  # a client that counts the cut a death
                        next_call_failed += 1
                settled = threading.Event()
                if mode == "kill" or next_call_failed:  # a fault comes from the watch: wait for it, bounded
                    deadline = time.monotonic() + 30
                    while len(faults) == seen and time.monotonic() < deadline:
                        time.sleep(0.01)
                supervision.submit(settled.set)
                settled.wait(30)
                faults_by[mode] += len(faults) - seen
    finally:
        mesh_client.actor.unhandled_fault_hook = before
    cuts, kills = (rounds + 1) // 2, rounds // 2
    return {
        "rounds": {"cut": cuts, "kill": kills},
        "error_p50_ms": {m: round(_pct(v, 0.5), 2) for m, v in error_ms.items()},
        "error_max_ms": {m: round(max(v, default=float("nan")), 2) for m, v in error_ms.items()},
        "right_error_type": right,  # cut: ConnectionBroken; kill: SupervisionError, not ConnectionBroken
        "faults": faults_by,  # cut: 0 expected; kill: 1 each
        "cut_next_call_p50_ms": round(_pct(next_call_ms, 0.5), 2),  # includes the rest of the 1 s sleep
        "cut_next_call_failed": next_call_failed,  # 0 expected
    }


@scenario("broken-link", "cut the connection to a live proc vs SIGKILL it, interleaved: error time, error type, faults")
def link_break_scenario(ctx: scenarios.Context) -> dict[str, Any]:
    return link_break_figures(ctx.args.rounds)


if __name__ == "__main__":
    import argparse
    import json

    import mesh_client

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20)
    figures = link_break_figures(p.parse_args().rounds)
    print(json.dumps({"mesh_client": os.path.dirname(mesh_client.__file__), **figures}))
