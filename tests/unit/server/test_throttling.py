"""Rate-limited log lines and back-off delays, driven by a fake scheduler.

Aspects: the first event of a quiet spell is written at once; later ones become one summary per
period with their count and the last line; a quiet period ends the spell; a flush writes the
summary of the period running now (a process that ends before it would lose it) and nothing
when it counted none; back-off delays double up to a cap and start again after a reset.
"""

from mesh_client._src.server import throttling


class FakeScheduler:
    """Collects scheduled callbacks; ``fire()`` runs the oldest as if its delay had passed."""

    def __init__(self):
        self.due = []

    def __call__(self, delay, fn):
        self.due.append((delay, fn))

    def fire(self):
        _, fn = self.due.pop(0)
        fn()


def make_log():
    lines, scheduler = [], FakeScheduler()
    log = throttling.RateLimitedLog("refused connections", scheduler, period=10, write=lines.append)
    return log, lines, scheduler


def test_first_event_is_written_at_once_and_the_rest_are_summarised():
    log, lines, scheduler = make_log()
    for i in range(1000):
        log.note(f"refused {i}")
    assert lines == ["refused 0"]
    assert [d for d, _ in scheduler.due] == [10]
    scheduler.fire()
    assert lines[1] == "procmesh: 999 more refused connections in the last 10 s (the last: refused 999)"
    assert log.events == 1000 and log.lines_written == 2


def test_a_summary_names_the_last_line_without_a_second_prefix():
    log, lines, scheduler = make_log()
    log.note("procmesh: refused connection from 127.0.0.1:1: a peer presented a wrong mesh token")
    log.note("procmesh: refused connection from 127.0.0.1:2: a peer presented a wrong mesh token")
    scheduler.fire()
    assert lines[1] == ("procmesh: 1 more refused connections in the last 10 s (the last: refused connection from "
                        "127.0.0.1:2: a peer presented a wrong mesh token)")


def test_a_sustained_flood_writes_one_line_per_period():
    log, lines, scheduler = make_log()
    for _period in range(5):
        for i in range(100):
            log.note(f"refused {i}")
        scheduler.fire()
    assert len(lines) == 1 + 5
    assert lines[1].startswith("procmesh: 99 more") and lines[2].startswith("procmesh: 100 more")


def test_a_quiet_period_ends_the_spell_and_the_next_event_is_written_in_full():
    log, lines, scheduler = make_log()
    log.note("first")
    scheduler.fire()  # nothing more came: the spell ends without a summary
    assert lines == ["first"] and not scheduler.due
    log.note("second")
    assert lines == ["first", "second"] and len(scheduler.due) == 1


def test_a_flush_writes_what_the_running_period_counted_once():
    log, lines, scheduler = make_log()
    log.flush()  # nothing happened: nothing to say
    for i in range(3):
        log.note(f"refused {i}")
    log.flush()
    log.flush()
    assert lines == ["refused 0", "procmesh: 2 more refused connections in the last 10 s (the last: refused 2)"]
    scheduler.fire()  # the period ends with nothing more counted: the spell ends, no second summary
    assert len(lines) == 2 and not scheduler.due
    assert log.events == 3


def test_backoff_doubles_up_to_its_cap_and_resets():
    backoff = throttling.Backoff(first=0.01, cap=0.05)
    assert [backoff.next_delay() for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    backoff.reset()
    assert backoff.next_delay() == 0.01
