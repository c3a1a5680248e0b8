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
