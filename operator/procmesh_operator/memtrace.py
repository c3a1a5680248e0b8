"""Where the operator's memory goes: tracemalloc snapshots at each new peak of its RSS.

A diagnostic, off unless ``--memory-trace DIR`` is given (:mod:`.__main__`): it slows every
allocation (tracemalloc) and so is for a benchmark run that looks for what holds memory, never
for production. A daemon thread reads the RSS every ``period`` seconds; whenever it has grown by
``step_mb`` since the last report, it writes ``DIR/peak.txt`` anew: the RSS, the gc counts, the
Python objects by type, and the allocations still held, grouped by the lines that made them (the
innermost frames of the operator's own code and of kopf first). The last file written is the
picture at the peak. Nothing else of the operator reads it.
"""

from __future__ import annotations

import collections
import gc
import pathlib
import threading
import time
import tracemalloc

FRAMES = 12
TOP = 40


def rss_mb() -> float:
    """This process's resident set (VmRSS), in MB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def report(rss: float, snapshot: tracemalloc.Snapshot, types_shown: int = 20) -> str:
    """The text of one report: totals, the ``types_shown`` most common types of gc-tracked
    objects with their counts, held allocations by origin."""
    stats = snapshot.statistics("traceback")
    traced = sum(s.size for s in stats) / 1e6
    types = collections.Counter(type(o).__name__ for o in gc.get_objects())
    lines = [f"at {time.strftime('%H:%M:%S')}: RSS {rss:.1f} MB, traced {traced:.1f} MB, "
             f"gc counts {gc.get_count()}, tracked objects {sum(types.values())}",
             "", "objects by type (gc-tracked):"]
    lines += [f"  {n:>9}  {name}" for name, n in types.most_common(types_shown)]
    lines += ["", f"held allocations by origin (top {TOP}):"]
    for stat in stats[:TOP]:
        lines.append(f"{stat.size / 1e6:9.2f} MB {stat.count:>8} blocks")
        lines += [f"      {f.filename}:{f.lineno}" for f in list(stat.traceback)[-FRAMES:]]
    return "\n".join(lines) + "\n"


def start(folder: pathlib.Path, *, period: float = 2.0, step_mb: float = 10.0) -> threading.Thread:
    """Trace allocations from now on and report each new peak into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(FRAMES)

    def watch() -> None:
        reported = 0.0
        while True:
            time.sleep(period)
            rss = rss_mb()
            if rss >= reported + step_mb:
                reported = rss
                text = report(rss, tracemalloc.take_snapshot())
                (folder / "peak.tmp").write_text(text)
                (folder / "peak.tmp").replace(folder / "peak.txt")

    thread = threading.Thread(target=watch, name="memory-trace", daemon=True)
    thread.start()
    return thread
