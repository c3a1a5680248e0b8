"""Where a call's CPU goes, thread by thread, on both sides, beside a raw pickle server (Linux).

Latency on a shared small machine moves with its load; what a call costs does much less. For a
no-op ``call_one`` to one of 8 local procs and a ``call()`` fan-out to all 8, this prints per
call (per fan-out for the fan-out), for each thread of the controller and of the procs:

- CPU time, from ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds, all of the thread's time on
  a core, kernel included);
- context switches, voluntary (the thread slept: a wait, a poll) and involuntary (it was
  preempted, or yielded in a spin), from ``/proc/<pid>/task/<tid>/status``;
- in a separate pass (a profiler slows everything it watches), the Python functions and the
  C functions each thread calls (``sys.setprofile``), a count that load does not move.

Beside them the same CPU and switch figures for a raw server (``actors.ECHO_SERVER``: one thread,
``recv``, ``pickle.loads``, ``pickle.dumps``, ``sendall``) over AF_UNIX, which local procs use,
for one round trip and for a fan-out to 8 such servers. Syscalls per call are not counted here
(that needs ``strace -c -f -p PID``, which slows the process it counts); see
``results/actors.md``.

    python benchmarks/call_costs.py                # table
    python benchmarks/call_costs.py --json         # JSON
    python benchmarks/call_costs.py --calls 20000  # more calls per figure
    python benchmarks/call_costs.py --runs 5       # the median of 5 runs (procmesh, raw, in turn)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from typing import Any

from actors import echo_server

# Counts of one pass of the profiler, per thread name and kind ("py" or "c"): filled by
# _count in whichever thread it watches (the controller's, or a proc's through an endpoint).
_COUNTS: collections.Counter[tuple[str, str]] = collections.Counter()


def _count(frame: Any, event: str, arg: Any) -> None:
    if event == "call" or event == "c_call":
        _COUNTS[(threading.current_thread().name, "py" if event == "call" else "c")] += 1


def _profile_here_and_io(on: bool) -> None:
    """Start (stop) counting calls in this thread and in this process's I/O thread."""
    from mesh_client._src.runtime import reactor

    fn = _count if on else None
    set_on_io = threading.Event()

    def on_io() -> None:
        sys.setprofile(fn)
        set_on_io.set()

    reactor.get_reactor().call_soon(on_io)
    if not set_on_io.wait(10):
        raise SystemExit("the I/O thread did not take the profiler within 10 s")
    sys.setprofile(fn)


def thread_stats(pid: int) -> dict[int, tuple[int, int, int]]:
    """Per thread of ``pid``: CPU ns, voluntary and involuntary context switches so far."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu_ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
        out[int(tid)] = (cpu_ns, int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"]))
    return out


def role(name: str) -> str:
    """A thread's role from its name: the actor threads of a proc are named after their actor."""
    if name.startswith("actor"):
        return "actor"
    return {"MainThread": "main", "procmesh-io": "io"}.get(name, "other")


def per_call(before: dict[int, dict[int, tuple[int, int, int]]], after: dict[int, dict[int, tuple[int, int, int]]],
             names: dict[int, str], calls: int) -> dict[str, dict[str, float]]:
    """CPU us and switches per call of each thread role (summed over processes), from two snapshots."""
    sums: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for pid, threads in after.items():
        for tid, now in threads.items():
            then = before[pid].get(tid, (0, 0, 0))
            total = sums[role(names.get(tid, ""))]
            for k in range(3):
                total[k] += now[k] - then[k]
    return {r: {"cpu_us": s[0] / calls / 1000, "voluntary_switches": s[1] / calls, "involuntary_switches": s[2] / calls}
            for r, s in sorted(sums.items()) if any(s)}


def by_role(counts: collections.Counter[tuple[str, str]]) -> dict[str, float]:
    """``{"io/py": n, ...}``: the calls counted, summed by thread role and kind."""
    out: collections.Counter[str] = collections.Counter()
    for (name, kind), n in list(counts.items()):
        out[f"{role(name)}/{kind}"] += n
    return {key: float(n) for key, n in sorted(out.items())}


def thread_names() -> dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def procmesh_figures(calls: int) -> dict[str, Any]:
    from mesh_client import Actor, endpoint, this_host

    class Probe(Actor):
        @endpoint
        def noop(self) -> None:
            return None

        @endpoint
        def threads(self) -> tuple[int, dict[int, str]]:
            return os.getpid(), thread_names()

        @endpoint
        def profile(self, on: bool) -> dict[str, float]:
            """Start counting calls on this actor's thread and the I/O thread; or stop, and
            say how many each made."""
            if on:
                _COUNTS.clear()
            _profile_here_and_io(on)
            return {} if on else by_role(_COUNTS)

    out: dict[str, Any] = {}
    with this_host().spawn_procs(per_host={"gpus": 8}, name="costs") as procs:
        probes = procs.spawn("probe", Probe)
        one = probes.slice(gpus=0)
        for _ in range(500):  # warm: connections, the poll's pace, the caches of fields and plans
            one.noop.call_one().get()
            probes.noop.call().get()
        names = thread_names()
        pids = []
        for pid, theirs in probes.threads.call().get().values():
            pids.append(pid)
            names.update(theirs)
        me = os.getpid()
        fanouts = max(1, calls // 4)
        for figure, n, procs_of in (("call_one", calls, pids[:1]), ("fanout8", fanouts, pids)):
            def run(n: int = n, figure: str = figure) -> None:
                for _ in range(n):
                    (one.noop.call_one() if figure == "call_one" else probes.noop.call()).get()

            before = {pid: thread_stats(pid) for pid in [me, *procs_of]}
            started = time.perf_counter()
            run()
            wall = time.perf_counter() - started
            after = {pid: thread_stats(pid) for pid in [me, *procs_of]}
            out[figure] = {
                "wall_us": wall / n * 1e6,
                "controller": per_call({me: before[me]}, {me: after[me]}, names, n),
                "procs": per_call({p: before[p] for p in procs_of}, {p: after[p] for p in procs_of}, names, n),
            }
            # The profiled pass: the controller's main and I/O threads, and proc 0's.
            one.profile.call_one(True).get()
            _COUNTS.clear()
            _profile_here_and_io(True)
            run(max(1, n // 10))
            _profile_here_and_io(False)
            proc_counts = one.profile.call_one(False).get()
            counted = max(1, n // 10)
            out[figure]["python_calls"] = {
                "controller": {k: v / counted for k, v in by_role(_COUNTS).items() if k.split("/")[0] in ("main", "io")},
                # proc 0's: per call_one, or per fan-out (of which it serves one call)
                "proc0": {k: v / counted for k, v in sorted(proc_counts.items()) if k.split("/")[0] in ("actor", "io")},
            }
            _COUNTS.clear()
    return out


def _roundtrip(sock: socket.socket, obj: object) -> None:
    sock.sendall(_frame(obj))
    (n,) = struct.unpack("!Q", sock.recv(8, socket.MSG_WAITALL))
    pickle.loads(sock.recv(n, socket.MSG_WAITALL))


def raw_figures(calls: int) -> dict[str, Any]:
    """The raw server's CPU and switches per round trip, and a fan-out to 8 of them, both sides."""
    me, tid = os.getpid(), threading.get_native_id()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pm-costs-") as workdir:
        servers = [echo_server("unix", workdir) for _ in range(8)]
        try:
            socks = [sock for _, sock in servers]
            for _ in range(500):
                for sock in socks:
                    _roundtrip(sock, None)
            fanouts = max(1, calls // 4)
            for figure, n, used in (("call_one", calls, servers[:1]), ("fanout8", fanouts, servers)):
                before = {p.pid: thread_stats(p.pid) for p, _ in used}
                mine = thread_stats(me)[tid]
                for _ in range(n):
                    for _, sock in used:  # every request out, then every reply in
                        sock.sendall(_frame(None))
                    for _, sock in used:
                        (size,) = struct.unpack("!Q", sock.recv(8, socket.MSG_WAITALL))
                        pickle.loads(sock.recv(size, socket.MSG_WAITALL))
                now = thread_stats(me)[tid]
                after = {p.pid: thread_stats(p.pid) for p, _ in used}
                deltas = [sum(a[k] - before[pid].get(t, (0, 0, 0))[k] for t, a in after[pid].items())
                          for pid in after for k in range(3)]
                totals = [sum(deltas[k::3]) for k in range(3)]
                out[figure] = {
                    "client": {"cpu_us": (now[0] - mine[0]) / n / 1000, "voluntary_switches": (now[1] - mine[1]) / n,
                               "involuntary_switches": (now[2] - mine[2]) / n},
                    "servers": {"cpu_us": totals[0] / n / 1000, "voluntary_switches": totals[1] / n,
                                "involuntary_switches": totals[2] / n},
                }
        finally:
            for server, sock in servers:
                sock.close()
                server.kill()
                server.wait()
    return out


def _frame(obj: object) -> bytes:
    data = pickle.dumps(obj, protocol=5)
    return struct.pack("!Q", len(data)) + data


def median_of(runs: list[Any]) -> Any:
    """The median of each figure over runs of the same shape (nested dicts of numbers)."""
    if isinstance(runs[0], dict):
        return {key: median_of([run[key] for run in runs if key in run]) for key in runs[0]}
    return statistics.median(runs)


def table(results: dict[str, Any]) -> str:
    lines = []
    for figure, label in (("call_one", "per call_one"), ("fanout8", "per fan-out to 8")):
        ours, raw = results["procmesh"][figure], results["raw"][figure]
        lines.append(f"{label} (procmesh wall {ours['wall_us']:.0f} us)")
        lines.append(f"  {'thread':26} {'CPU us':>8} {'slept':>6} {'preempted':>9}")
        for side in ("controller", "procs"):
            for name, row in ours[side].items():
                lines.append(f"  {side + ' ' + name:26} {row['cpu_us']:8.1f} {row['voluntary_switches']:6.2f} "
                             f"{row['involuntary_switches']:9.2f}")
        for side in ("client", "servers"):
            row = raw[side]
            lines.append(f"  {'raw ' + side:26} {row['cpu_us']:8.1f} {row['voluntary_switches']:6.2f} "
                         f"{row['involuntary_switches']:9.2f}")
        calls = ours["python_calls"]
        lines.append("  Python / C functions called: controller "
                     + ", ".join(f"{k} {v:.1f}" for k, v in calls["controller"].items())
                     + "; proc 0 " + ", ".join(f"{k} {v:.1f}" for k, v in calls["proc0"].items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10000, help="call_ones per figure (fan-outs: a quarter)")
    parser.add_argument("--runs", type=int, default=1, help="runs, each procmesh then raw; the median is shown")
    parser.add_argument("--json", action="store_true", help="print JSON (every run, and the median) instead of a table")
    args = parser.parse_args()
    if not os.path.exists(f"/proc/{os.getpid()}/task"):
        raise SystemExit("call_costs.py reads /proc/<pid>/task: it runs on Linux only")
    runs = [{"procmesh": procmesh_figures(args.calls), "raw": raw_figures(args.calls)} for _ in range(max(1, args.runs))]
    median = median_of(runs)
    print(json.dumps({"runs": runs, "median": median}, indent=2) if args.json else table(median))


if __name__ == "__main__":
    main()
