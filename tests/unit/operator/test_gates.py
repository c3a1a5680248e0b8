"""The priority gate of pod creates: a bound on holders, lowest priority first, then arrival.

Aspects: never more than ``limit`` holders; waiters are let in by priority and, within one, in
arrival order (so the earliest mesh's pods are all created first); a cancelled waiter gives up
its turn and loses no place; a nonsensical limit is refused with a message.
"""

import asyncio

import pytest

from procmesh_operator import gates


def test_waiters_go_in_by_priority_then_arrival_never_above_the_limit():
    async def main():
        gate = gates.PriorityGate(2)
        order, holding, most = [], 0, 0
        release = asyncio.Event()

        async def job(name, priority):
            nonlocal holding, most
            async with gate.place(priority):
                holding += 1
                most = max(most, holding)
                order.append(name)
                await release.wait()
                await asyncio.sleep(0)
                holding -= 1

        first = [asyncio.create_task(job(n, 5)) for n in ("a", "b")]  # take both places
        await asyncio.sleep(0)
        later = [asyncio.create_task(job(n, p)) for n, p in
                 (("late-9", 9), ("mesh1-x", 1), ("mesh0-x", 0), ("mesh1-y", 1), ("mesh0-y", 0))]
        await asyncio.sleep(0)
        assert gate.waiting == 5
        release.set()
        await asyncio.gather(*first, *later)
        return order, most

    order, most = asyncio.run(main())
    assert most == 2
    assert order == ["a", "b", "mesh0-x", "mesh0-y", "mesh1-x", "mesh1-y", "late-9"]


def test_a_cancelled_waiter_loses_its_turn_and_no_place():
    async def main():
        gate = gates.PriorityGate(1)
        await gate.acquire(0)
        gone = asyncio.create_task(gate.acquire(0))
        kept = asyncio.create_task(gate.acquire(1))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        gate.release()
        await asyncio.wait_for(kept, 5)
        gate.release()
        await asyncio.wait_for(gate.acquire(0), 5)  # the place came back: nothing leaked
        return gate.waiting

    assert asyncio.run(main()) == 0


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        gates.PriorityGate(0)
