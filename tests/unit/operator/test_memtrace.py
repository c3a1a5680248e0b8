"""The memory-trace diagnostic's report: the RSS, object counts by type and the held
allocations by the lines that made them (here, this file's), largest first."""

import re
import tracemalloc

from procmesh_operator import memtrace


class Held:
    pass


def test_a_report_names_what_holds_memory():
    tracemalloc.start(memtrace.FRAMES)
    try:
        held = [bytearray(100_000) for _ in range(50)]  # 5 MB from one line of this file
        keep = [Held() for _ in range(1000)]
        # Every type listed: how common Held is among the types depends on what else this process holds.
        text = memtrace.report(memtrace.rss_mb(), tracemalloc.take_snapshot(), types_shown=10**6)
    finally:
        tracemalloc.stop()
    assert held and keep
    head, _, rest = text.partition("held allocations by origin")
    assert "RSS " in head and re.search(r"^ +1000  Held$", head, re.M)  # gc-tracked objects by type
    blocks = [b for b in rest.split("\n") if " MB " in b]
    first = rest[rest.index(blocks[0]):rest.index(blocks[1])]  # the largest, with its lines
    assert float(blocks[0].split()[0]) >= 5.0 and "test_memtrace.py" in first
