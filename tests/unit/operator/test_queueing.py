"""The work queue: coalescing, one worker per key, retries with backoff, requeue delays."""

import asyncio

from procmesh_operator import queueing


def test_burst_is_coalesced_and_never_concurrent():
    async def main():
        running, calls, peak = set(), [], [0]

        async def worker(key):
            assert key not in running
            running.add(key)
            peak[0] = max(peak[0], len(running))
            calls.append(key)
            await asyncio.sleep(0.01)
            running.discard(key)
            return None

        q = queueing.WorkQueue(worker)
        for _ in range(50):
            q.enqueue("a")
            q.enqueue("b")
        await asyncio.sleep(0)
        q.enqueue("a")  # arrives while "a" runs: exactly one more run
        while any(s.task for s in q._slots.values()):
            await asyncio.sleep(0.005)
        await q.close()
        return calls

    calls = asyncio.run(main())
    assert calls.count("a") == 2 and calls.count("b") == 1


def test_failure_is_retried(monkeypatch):
    monkeypatch.setattr(queueing, "BACKOFF_BASE", 0.001)

    async def main():
        attempts = []

        async def worker(key):
            attempts.append(key)
            if len(attempts) < 3:
                raise RuntimeError("transient")
            return None

        q = queueing.WorkQueue(worker)
        q.enqueue("k")
        while len(attempts) < 3:
            await asyncio.sleep(0.005)
        await q.close()
        return attempts

    assert asyncio.run(main()) == ["k", "k", "k"]


def test_an_expected_failure_is_one_log_line_and_others_keep_their_traceback(monkeypatch, caplog):
    """A refusal retried for hours logs one line each time; an unexpected error its traceback."""
    monkeypatch.setattr(queueing, "BACKOFF_BASE", 0.001)

    class Refused(Exception):
        pass

    async def main():
        attempts = []

        async def worker(key):
            attempts.append(key)
            if len(attempts) == 1:
                raise Refused("403 Forbidden: exceeded quota")
            if len(attempts) == 2:
                raise RuntimeError("a bug")
            return None

        q = queueing.WorkQueue(worker, expected=(Refused,))
        q.enqueue("k")
        while len(attempts) < 3:
            await asyncio.sleep(0.005)
        await q.close()

    with caplog.at_level("WARNING", logger=queueing.logger.name):
        asyncio.run(main())
    expected, unexpected = [r for r in caplog.records if "reconcile of" in r.getMessage()]
    assert expected.levelname == "WARNING" and expected.exc_info is None
    assert expected.getMessage().endswith("403 Forbidden: exceeded quota")
    assert unexpected.levelname == "ERROR" and unexpected.exc_info is not None


def test_close_lets_a_reconcile_in_flight_finish_and_cancels_one_past_the_drain():
    """A stopping replica (failover, upgrade) lets a reconcile finish rather than cut it
    between two creates (a token Secret made, its name not yet recorded, is left an orphan)."""
    async def main():
        steps = []
        second = asyncio.Event()

        async def worker(key):
            steps.append(f"{key}: first create")
            if key == "stuck":
                await asyncio.Event().wait()  # never ends: cancelled once the drain is over
            await second.wait()
            steps.append(f"{key}: second create")
            return None

        q = queueing.WorkQueue(worker)
        q.enqueue("mesh")
        await asyncio.sleep(0)  # the reconcile has started and waits between its two creates
        asyncio.get_running_loop().call_soon(second.set)  # its second request answers during close
        await q.close()
        finished = list(steps)

        q = queueing.WorkQueue(worker)
        q.enqueue("stuck")
        q.enqueue("later", delay=60)  # a pending retry is dropped, not run
        await asyncio.sleep(0)
        await q.close(drain=0.05)
        return finished, steps[len(finished):], q._slots["stuck"].task

    finished, stuck, task = asyncio.run(main())
    assert finished == ["mesh: first create", "mesh: second create"]
    assert stuck == ["stuck: first create"] and task is None


def test_events_during_a_run_wait_a_multiple_of_it_capped():
    """A busy key (a big mesh's reconcile, events all along) takes at most a quarter of the
    operator's time: the events of a run wait three times its length, at most BATCH_MAX."""
    assert queueing.batch_wait(0.0) == 0.0
    assert queueing.batch_wait(0.05) == 0.05 * queueing.BATCH_FACTOR
    assert queueing.batch_wait(10.0) == queueing.BATCH_MAX
    assert queueing.BATCH_FACTOR >= 3.0


def test_a_key_enqueued_after_a_run_waits_the_batch(monkeypatch):
    """The events of a big mesh reach the queue after its reconcile, not during it, when the
    reconcile's work does not await (the event loop is busy with it): they wait all the same."""
    runs_seen: list[float] = []
    monkeypatch.setattr(queueing, "batch_wait", lambda run: runs_seen.append(run) or 0.05)

    async def main():
        loop = asyncio.get_running_loop()
        starts, ends, order = [], [], []

        async def worker(key):
            order.append(key)
            starts.append(loop.time())
            await asyncio.sleep(0.02)
            ends.append(loop.time())
            return None

        q = queueing.WorkQueue(worker)
        q.enqueue("k")
        while not ends:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0)  # the run's task ends
        q.enqueue("k")  # an event after the run
        q.enqueue("other")  # another key is not held back
        while len(ends) < 3:
            await asyncio.sleep(0.001)
        await q.close()
        return starts, ends, order

    starts, ends, order = asyncio.run(main())
    assert runs_seen[0] >= 0.02  # the wait is computed from the run's length
    assert order == ["k", "other", "k"]  # another key is not held back
    assert starts[2] >= ends[0] + 0.05 - 0.001  # "k" after the batch (asyncio's clock slack)


def test_a_key_discarded_while_it_waits_its_turn_does_not_run_and_leaves_nothing(monkeypatch):
    """A mesh deleted while its next run waits out the batch: the run does not start, and its
    slot goes; an enqueue after the discard runs it again."""
    monkeypatch.setattr(queueing, "batch_wait", lambda run: 0.05)

    async def main():
        runs = []

        async def worker(key):
            runs.append(key)
            return None

        q = queueing.WorkQueue(worker)
        q.enqueue("k")
        while not runs:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0)
        q.enqueue("k")  # waits 0.05 s for its turn
        q.discard("k")
        await asyncio.sleep(0.1)
        after_discard = (list(runs), q.keys())
        q.enqueue("k")
        q.discard("k")
        q.enqueue("k")  # the latest word: run it
        await asyncio.sleep(0.1)
        await q.close()
        return after_discard, runs

    (runs_then, keys_then), runs = asyncio.run(main())
    assert runs_then == ["k"] and keys_then == []
    assert runs == ["k", "k"]
